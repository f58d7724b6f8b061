"""The commits of one owner from the ledger in PostgreSQL (what `CeleryDispatcher.recent`
and the memory browser's commit list read): only the account's, only the user's or agent's
when asked, newest first, with the phase timings and the LLM usage of the result."""

from __future__ import annotations

from ctxpipe.core.enums import CommitPhase
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.commit_list import commits_of_owner
from ctxpipe.storage.db import Database


def test_commits_of_one_owner_newest_first(database: Database, clean_db: str) -> None:
    ledger = CommitLedger(database, schema="ctx")
    owners = [
        ("c1", "acme", "alice", "helper"),
        ("c2", "acme", "bob", "helper"),
        ("c3", "acme", "alice", "coder"),
        ("c4", "globex", "alice", "helper"),
    ]
    for cid, account, user, agent in owners:
        who = {"account_id": account, "user_id": user, "agent_id": agent, "session_id": cid}
        assert ledger.create(cid, who, {"messages": [{"id": "m1"}]})
    ledger.advance(
        "c1",
        CommitPhase.REGISTERED,
        status="success",
        timings={"archive_ms": 12, "total_ms": 40},
        result={"stats": {"llm_calls": 5, "llm_prompt_tokens": 501}},
    )
    with database.connection() as conn:  # accepted one after the other
        for n, (cid, *_) in enumerate(owners):
            conn.execute(
                "UPDATE ctx.commits SET created_at = now() - make_interval(mins => %s) "
                "WHERE commit_id = %s",
                (10 - n, cid),
            )

    acme = commits_of_owner(database, "ctx", "acme")
    assert [c.commit_id for c in acme] == ["c3", "c2", "c1"]
    alice = commits_of_owner(database, "ctx", "acme", user_id="alice")
    assert [c.commit_id for c in alice] == ["c3", "c1"]
    helper = commits_of_owner(database, "ctx", "acme", agent_id="helper", limit=1)
    assert [c.commit_id for c in helper] == ["c2"]
    done = next(c for c in alice if c.commit_id == "c1")
    assert done.finished and done.status == "success"
    assert done.timings == {"archive_ms": 12, "total_ms": 40}
    assert done.stats is not None and (done.stats.llm_calls, done.stats.llm_prompt_tokens) == (
        5,
        501,
    )
    assert commits_of_owner(database, "ctx", "initech") == []
