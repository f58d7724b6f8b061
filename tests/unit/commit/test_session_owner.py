"""A session belongs to the user and agent whose commit first wrote to it:
another user's commit naming it is refused before anything is written, a commit id is looked
up only within the session's owner, and `used_contexts` resolve only what the committer may
read."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import SESSION_1, SESSION_2, commit, ctx, request, snapshot
from pydantic import ValidationError

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.phases import _recalled_texts
from ctxpipe.core.errors import CommitError
from ctxpipe.core.session import Message, SessionInput, ToolUse
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs.session_owner import OWNER_FILE, SessionOwners, may_read


def owner_file(settings, session: str = "s1"):  # type: ignore[no-untyped-def]
    return settings.fs_root / "acme" / "sessions" / session / OWNER_FILE


def test_the_first_commit_records_the_owner_on_the_fs(make_components, unit_settings):
    commit(make_components(), request(SESSION_1))
    assert json.loads(owner_file(unit_settings).read_bytes()) == {
        "user_id": "alice",
        "agent_id": "helper",
    }
    comp = make_components()
    owner = SessionOwners(comp.fs).owner("acme", "s1")
    assert owner is not None and owner.user_id == "alice"
    # hidden: no listing shows it
    names = [c.name for c in comp.fs.list_children("ctx://acme/sessions/s1/")]
    assert OWNER_FILE not in names and names == ["archives"]


def test_another_users_commit_into_the_session_is_refused_and_writes_nothing(
    make_components, unit_settings
):
    commit(make_components(), request(SESSION_1))
    before = snapshot(unit_settings.fs_root)
    outbox = make_components().outbox
    with pytest.raises(CommitError, match="belongs to another user") as info:
        commit(make_components(outbox=outbox), request(SESSION_2, user="bob", commit_id="c2"))
    assert info.value.phase == "archive"
    assert snapshot(unit_settings.fs_root) == before
    assert outbox.events == {}


def test_another_users_reused_commit_id_never_returns_the_owners_result(
    make_components, unit_settings
):
    first = commit(make_components(), request(SESSION_1, commit_id="shared"))
    assert first.archive is not None and first.archive.recent_messages
    before = snapshot(unit_settings.fs_root)
    with pytest.raises(CommitError, match="belongs to another user") as info:
        commit(make_components(), request(SESSION_2, user="bob", commit_id="shared"))
    assert "Berlin" not in str(info.value)  # nothing of alice's session in the error
    assert snapshot(unit_settings.fs_root) == before
    # the owner re-running her own commit id still gets her recorded result (idempotency)
    again = commit(make_components(), request(SESSION_1, commit_id="shared"))
    assert again.model_dump() == first.model_dump()


def test_another_agent_of_the_same_user_is_refused(make_components, unit_settings):
    commit(make_components(), request(SESSION_1))
    req = request(SESSION_2, commit_id="c2")
    req = req.model_copy(update={"ctx": ctx("alice", "s1", agent="other")})
    with pytest.raises(CommitError, match="belongs to another agent"):
        commit(make_components(), req)


def test_the_owner_commits_again_into_her_session(make_components):
    commit(make_components(), request(SESSION_1))
    second = commit(make_components(), request(SESSION_2, commit_id="c2"))
    assert second.archive is not None
    assert second.archive.archive_uri == "ctx://acme/sessions/s1/archives/2"


def test_two_racing_first_commits_have_exactly_one_winner(make_components, unit_settings):
    users = ["alice", "bob", "carol", "dave"]

    def run(user: str) -> str:
        try:
            commit(make_components(), request(SESSION_1, user=user, commit_id=f"c-{user}"))
            return user
        except CommitError as exc:
            assert "belongs to another user" in str(exc)
            return ""

    with ThreadPoolExecutor(len(users)) as pool:
        winners = [u for u in pool.map(run, users) if u]
    assert len(winners) == 1
    owner = json.loads(owner_file(unit_settings).read_bytes())
    assert owner["user_id"] == winners[0]
    archives = list((unit_settings.fs_root / "acme/sessions/s1/archives").iterdir())
    assert len(archives) == 1


def test_a_session_without_a_recorded_owner_belongs_to_its_oldest_archives_user(
    make_components, unit_settings
):
    commit(make_components(), request(SESSION_1))
    owner_file(unit_settings).unlink()  # a session written before owners were recorded
    owner = SessionOwners(make_components().fs).owner("acme", "s1")
    assert owner is not None and (owner.user_id, owner.recorded) == ("alice", False)
    before = snapshot(unit_settings.fs_root)
    with pytest.raises(CommitError, match="belongs to another user"):
        commit(make_components(), request(SESSION_2, user="bob", commit_id="c2"))
    assert snapshot(unit_settings.fs_root) == before
    commit(make_components(), request(SESSION_2, commit_id="c2"))
    assert json.loads(owner_file(unit_settings).read_bytes())["user_id"] == "alice"


def test_a_short_session_without_archive_still_claims_the_session(make_components):
    short = SESSION_2[:2]
    commit(make_components(), request(short))
    with pytest.raises(CommitError, match="belongs to another user"):
        commit(make_components(), request(short, user="bob", commit_id="c2"))


def test_used_contexts_resolve_only_what_the_committer_may_read(make_components):
    comp = make_components()
    result = commit(comp, request(SESSION_1))
    profile = next(w.uri for w in result.write_results if "/users/alice/" in w.uri)
    archive = result.archive.archive_uri if result.archive else None
    assert archive
    mine = request(SESSION_2, session="s2", commit_id="c2", used_contexts=[profile, archive])
    assert len(_recalled_texts(comp, mine)) == 2
    theirs = request(
        SESSION_2, user="bob", session="s3", commit_id="c3", used_contexts=[profile, archive]
    )
    assert _recalled_texts(comp, theirs) == []
    # a session id that is bob's own on paper but alice's on the FS resolves nothing either
    sneaky = request(SESSION_2, user="bob", session="s1", commit_id="c4", used_contexts=[archive])
    assert _recalled_texts(comp, sneaky) == []


def test_may_read_rules(make_components):
    comp = make_components()
    commit(comp, request(SESSION_1))
    owners = SessionOwners(comp.fs)
    bob = ctx("bob", "s1")
    alice = ctx("alice", "elsewhere")

    def uri(s: str) -> CtxURI:
        return CtxURI.parse(s)

    assert may_read(alice, uri("ctx://acme/sessions/s1/archives/1"), owners)
    assert not may_read(bob, uri("ctx://acme/sessions/s1/archives/1"), owners)
    assert may_read(bob, uri("ctx://acme/sessions/new/"), owners) is False  # not bob's session
    assert may_read(ctx("bob", "new"), uri("ctx://acme/sessions/new/"), owners)
    assert not may_read(bob, uri("ctx://globex/users/bob/"), owners)
    assert may_read(bob, uri("ctx://acme/resources/docs"), owners)
    assert not may_read(bob, uri("ctx://acme/users/alice/memories/profile"), owners)
    assert not may_read(bob, uri("ctx://acme/agents/other/"), owners)


BAD_IDS = [
    "m\x001",
    "m\n1",
    "m\r1",
    "m\t1",
    "\u202em1",  # right-to-left override
    "m\u200b1",  # zero-width space
    "m\x7f",
    " m1",
    "m1 ",
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_ids_are_printable_single_line_text(bad: str):
    with pytest.raises(ValidationError, match="printable single-line|whitespace"):
        Message(id=bad, role="user", content="hello")
    with pytest.raises(ValidationError, match="printable single-line|whitespace"):
        ToolUse(name=bad)
    with pytest.raises(ValidationError, match="printable single-line|whitespace"):
        ToolUse(name="t", message_id=bad)
    with pytest.raises(ValidationError):
        SessionInput(
            account_id="acme",
            user_id="u",
            session_id="s",
            commit_id=None,
            messages=[{"id": "m1", "role": "user", "content": "x", "name": bad}],
        )
    with pytest.raises(ValidationError):
        CommitRequest(
            commit_id=bad, ctx=ctx(), messages=[{"id": "m", "role": "user", "content": "x"}]
        )
