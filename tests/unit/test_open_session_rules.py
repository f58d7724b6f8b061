"""Open sessions on the in-memory twin of the store: commits are cut by count, by tokens,
after an idle time and on a close; appends are idempotent by message id; a cut whose submit
was lost is submitted again under the same commit id, and the ledger keeps it once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ctxpipe.commit import steps
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import LimitsConfig, Message, RequestContext
from ctxpipe.fs.session_owner import SessionOwnerError
from ctxpipe.retrieval.tokens import WhitespaceTokenCounter
from ctxpipe.sessions import CutRules, OpenSessions
from ctxpipe.sessions.memory_store import InMemoryOpenSessionStore
from ctxpipe.sessions.rules import BY_COUNT, BY_TOKENS, cut_commit_id

CTX = RequestContext(account_id="acme", user_id="ann", agent_id="helper", session_id="s1")


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)


class World:
    """OpenSessions over the in-memory store, submitting into the in-memory ledger through
    the commit submit step (what the dispatchers call)."""

    def __init__(self, rules: CutRules, fail_submits: int = 0) -> None:
        self.clock = Clock()
        self.ledger = InMemoryLedger()
        self.store = InMemoryOpenSessionStore(clock=self.clock)
        self.submitted: list[str] = []
        self.fail_submits = fail_submits
        self.sessions = OpenSessions(
            self.store, rules, self.submit, WhitespaceTokenCounter().count, LimitsConfig()
        )

    def submit(self, req: CommitRequest) -> str:
        if self.fail_submits > 0:
            self.fail_submits -= 1
            raise ConnectionError("broker unreachable")
        steps.submit(self.ledger, req, LimitsConfig())
        self.submitted.append(req.commit_id)
        return req.commit_id

    def committed_ids(self, commit_id: str) -> list[str]:
        row = self.ledger.get(commit_id)
        assert row is not None, commit_id
        return [m["id"] for m in row.request["messages"]]  # type: ignore[index,union-attr]


def msgs(*ids: str, words: int = 1) -> list[Message]:
    return [Message(id=i, role="user", content=" ".join(["word"] * words)) for i in ids]


def test_a_commit_is_cut_each_time_the_open_part_reaches_the_message_count() -> None:
    w = World(CutRules(max_messages=3, max_tokens=10_000, idle_s=600))
    results = [w.sessions.append(CTX, msgs(f"m{2 * i + 1}", f"m{2 * i + 2}")) for i in range(4)]
    cuts = [c for r in results for c in r.commit_ids]
    assert len(cuts) == 2 and w.submitted == cuts
    assert w.committed_ids(cuts[0]) == ["m1", "m2", "m3"]
    assert w.committed_ids(cuts[1]) == ["m4", "m5", "m6"]
    assert results[-1].open_messages == 2  # m7, m8 wait for the next cut
    assert w.store.get_cut(cuts[0]).reason == BY_COUNT  # type: ignore[union-attr]


def test_one_append_larger_than_the_count_is_cut_in_several_commits_in_order() -> None:
    w = World(CutRules(max_messages=4, max_tokens=10_000, idle_s=600))
    out = w.sessions.append(CTX, msgs(*[f"m{i}" for i in range(1, 11)]))
    assert [w.committed_ids(c) for c in out.commit_ids] == [
        ["m1", "m2", "m3", "m4"],
        ["m5", "m6", "m7", "m8"],
    ]
    assert out.appended == 10 and out.open_messages == 2


def test_a_commit_is_cut_when_the_open_part_reaches_the_token_count() -> None:
    w = World(CutRules(max_messages=100, max_tokens=10, idle_s=600))
    first = w.sessions.append(CTX, msgs("m1", "m2", words=4))
    assert first.commit_ids == [] and first.open_tokens == 8
    second = w.sessions.append(CTX, msgs("m3", "m4", words=4))
    assert len(second.commit_ids) == 1 and second.open_tokens == 4
    assert w.committed_ids(second.commit_ids[0]) == ["m1", "m2", "m3"]
    assert w.store.get_cut(second.commit_ids[0]).reason == BY_TOKENS  # type: ignore[union-attr]


def test_an_idle_session_is_cut_by_the_sweep_and_only_once_idle() -> None:
    w = World(CutRules(max_messages=100, max_tokens=10_000, idle_s=60))
    w.sessions.append(CTX, msgs("m1", "m2"))
    w.clock.advance(59)
    assert w.sessions.cut_idle() == []
    w.sessions.append(CTX, msgs("m3"))  # a new message restarts the idle time
    w.clock.advance(59)
    assert w.sessions.cut_idle() == []
    w.clock.advance(2)
    (cut,) = w.sessions.cut_idle()
    assert w.committed_ids(cut) == ["m1", "m2", "m3"]
    w.clock.advance(600)
    assert w.sessions.cut_idle() == []  # nothing open any more


def test_a_close_commits_what_is_open_and_a_second_close_nothing() -> None:
    w = World(CutRules(max_messages=100, max_tokens=10_000, idle_s=600))
    w.sessions.append(CTX, msgs("m1", "m2"))
    closed = w.sessions.close(CTX)
    assert len(closed.commit_ids) == 1 and w.committed_ids(closed.commit_ids[0]) == ["m1", "m2"]
    assert w.sessions.close(CTX).commit_ids == []
    again = w.sessions.append(CTX, msgs("m3"), close=True)  # append and close in one call
    assert len(again.commit_ids) == 1 and w.committed_ids(again.commit_ids[0]) == ["m3"]
    assert again.open_messages == 0


def test_appends_are_idempotent_by_message_id() -> None:
    w = World(CutRules(max_messages=3, max_tokens=10_000, idle_s=600))
    w.sessions.append(CTX, msgs("m1", "m2"))
    retried = w.sessions.append(CTX, msgs("m1", "m2", "m3"))
    assert (retried.appended, retried.duplicates) == (1, 2)
    (cut,) = retried.commit_ids
    assert w.committed_ids(cut) == ["m1", "m2", "m3"]
    late = w.sessions.append(CTX, msgs("m2", "m3"))  # already committed: still not again
    assert (late.appended, late.duplicates, late.commit_ids) == (0, 2, [])
    with pytest.raises(ValueError, match="duplicate message id 'm4'"):
        w.sessions.append(CTX, msgs("m4", "m4"))
    assert w.store.state(CTX).open_messages == 0  # type: ignore[union-attr]


def test_another_user_or_agent_cannot_append_to_or_close_the_session() -> None:
    w = World(CutRules(max_messages=100, max_tokens=10_000, idle_s=600))
    w.sessions.append(CTX, msgs("m1"))
    for other in ({"user_id": "bob"}, {"agent_id": "other"}):
        theirs = CTX.model_copy(update=other)
        with pytest.raises(SessionOwnerError):
            w.sessions.append(theirs, msgs("x1"))
        with pytest.raises(SessionOwnerError):
            w.sessions.close(theirs)
    assert w.store.state(CTX).open_messages == 1  # type: ignore[union-attr]


def test_a_cut_whose_submit_was_lost_is_submitted_again_under_the_same_id() -> None:
    w = World(CutRules(max_messages=2, max_tokens=10_000, idle_s=600), fail_submits=1)
    out = w.sessions.append(CTX, msgs("m1", "m2"))  # cut, then the submit fails
    (cut,) = out.commit_ids
    assert w.ledger.get(cut) is None and w.store.unsubmitted(0, 10) == [cut]
    assert w.sessions.resubmit(older_than_s=0) == [cut]
    assert w.committed_ids(cut) == ["m1", "m2"] and w.store.unsubmitted(0, 10) == []
    # submitted again anyway (a crash after the submit, before it was marked): one commit
    w.sessions.submit_cut(cut)
    assert w.submitted == [cut, cut] and w.ledger.counts_by_phase() == {"enqueued": 1}


def test_a_cut_never_holds_more_messages_than_a_commit_accepts() -> None:
    from ctxpipe.core.config import Settings

    rules = CutRules.from_settings(
        Settings(session_max_messages=5000, limits=LimitsConfig(max_messages=50))
    )
    assert rules.max_messages == 50


def test_cut_commit_ids_are_derived_and_distinct() -> None:
    opened = datetime(2026, 1, 1, tzinfo=UTC)
    a = cut_commit_id("acme", "s1", opened, 1)
    assert a == cut_commit_id("acme", "s1", opened, 1)
    assert len({a, cut_commit_id("acme", "s1", opened, 2), cut_commit_id("acme", "s2", opened, 1),
                cut_commit_id("acme", "s1", opened + timedelta(seconds=1), 1)}) == 4  # fmt: skip
    CommitRequest(commit_id=a, ctx=CTX, messages=msgs("m1"))  # a valid commit id
