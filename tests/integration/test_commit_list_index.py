"""The commit list on a ledger of 50,000 commits: migration 010 applies to a ledger that
already holds them, and afterwards `commits_of_owner` (what the memory browser and
`CeleryDispatcher.recent` read for an account's, a user's or an agent's key) reads an index
in its own order and stops at its LIMIT — no scan of the whole ledger, no sort — and still
returns the newest commits first. It does so under a generic plan as well as a custom one:
psycopg prepares a statement on the server after 5 executions on a connection, and PostgreSQL
may then plan it once for any parameters (`plan_cache_mode = force_generic_plan` makes it)."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ctxpipe.storage.commit_list import commit_list_query, commits_of_owner
from ctxpipe.storage.db import Database
from ctxpipe.storage.migrations import default_sql_dir, load_migrations, migrate
from ctxpipe.storage.queries import Queries

ROWS = 50_000
MIGRATION = "010_commit_list.sql"

# 80% of the commits are one account's ("acme"), the rest spread over 97 small ones; 500
# users; 7 agents, and one rare agent (a commit in a thousand). Commit g is g seconds newer
# than commit g-1.
FILL = """
INSERT INTO {schema}.commits
    (commit_id, account_id, user_id, agent_id, session_id, phase, status, request, created_at)
SELECT 'c' || g,
       CASE WHEN mod(g, 10) < 8 THEN 'acme' ELSE 'acct' || mod(g, 97) END,
       'user' || mod(g, 500),
       CASE WHEN mod(g, 1000) = 0 THEN 'rare' ELSE 'agent' || mod(g, 7) END,
       's' || g,
       'registered', 'success', '{{"messages": []}}'::jsonb,
       now() - make_interval(secs => %(rows)s - g)
FROM generate_series(1, %(rows)s) AS g
"""

MODES = ("force_custom_plan", "force_generic_plan")
LISTS = {  # (user, agent) of the key -> the index its list reads, and the columns it seeks
    (None, None): ("idx_commits_account_recent", ("account_id",)),
    ("user42", None): ("idx_commits_user_recent", ("account_id", "user_id")),
    ("user42", "agent0"): ("idx_commits_user_recent", ("account_id", "user_id")),
    (None, "rare"): ("idx_commits_agent_recent", ("account_id", "agent_id")),
}


@pytest.fixture
def ledger_schema(pg_url: str) -> Iterator[str]:
    """A schema of its own (the 50,000 rows never reach the suite's `ctx`); dropped after."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _plan(url: str, schema: str, params: dict[str, Any], mode: str) -> dict[str, Any]:
    """The plan of the query the commit list runs for `params`, prepared on the server (as
    psycopg does) and explained under `mode`: a custom plan (the values known) or a generic one."""
    query = Queries(schema)[commit_list_query(params["user_id"], params["agent_id"])]
    names: list[str] = []
    for name in re.findall(r"%\((\w+)\)s", query):
        if name not in names:
            names.append(name)
    for i, name in enumerate(names, 1):
        query = query.replace(f"%({name})s", f"${i}")
    values = sql.SQL(", ").join(sql.Literal(params[n]) for n in names)
    with psycopg.connect(url) as conn:
        conn.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Identifier(mode)))
        conn.execute(f"PREPARE commit_list AS {query}")
        explain = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE commit_list ({})").format(values)
        row = conn.execute(explain).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    out = [plan]
    for child in plan.get("Plans", []):
        out.extend(_nodes(child))
    return out


def _params(user: str | None, agent: str | None) -> dict[str, Any]:
    return {"account_id": "acme", "user_id": user, "agent_id": agent, "limit": 50}


def _expected(user: str | None, agent: str | None, limit: int = 50) -> list[str]:
    """The newest `limit` commits of acme (of the user / agent), from the fill's formula."""
    out: list[str] = []
    for g in range(ROWS, 0, -1):
        if g % 10 >= 8:
            continue
        if user is not None and f"user{g % 500}" != user:
            continue
        if agent is not None and ("rare" if g % 1000 == 0 else f"agent{g % 7}") != agent:
            continue
        out.append(f"c{g}")
        if len(out) == limit:
            break
    return out


def test_the_commit_list_reads_an_index_on_a_large_ledger(
    pg_url: str, ledger_schema: str, tmp_path: Path
) -> None:
    # the ledger as it was before migration 010, already holding 50,000 commits
    before = tmp_path / "sql"
    before.mkdir()
    for mig in load_migrations():
        if mig.name < MIGRATION:
            shutil.copy(default_sql_dir() / mig.name, before / mig.name)
    migrate(pg_url, schema=ledger_schema, embedding_dim=8, sql_dir=before)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL(FILL).format(schema=sql.Identifier(ledger_schema)), {"rows": ROWS})
        conn.execute(sql.SQL("ANALYZE {}.commits").format(sql.Identifier(ledger_schema)))
    # what the indexes remove: a scan of the ledger (or of the account's rows) and a sort
    old = {
        m: {n["Node Type"] for n in _nodes(_plan(pg_url, ledger_schema, _params(None, None), m))}
        for m in MODES
    }
    assert {"Seq Scan", "Sort"} <= old["force_custom_plan"], old
    assert "Sort" in old["force_generic_plan"], old

    applied = migrate(pg_url, schema=ledger_schema, embedding_dim=8)
    assert applied[:1] == [MIGRATION]  # then any later ones
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}.commits").format(sql.Identifier(ledger_schema)))
    for mode in MODES:
        for (user, agent), (index, columns) in LISTS.items():
            # the LIMIT over a scan of the list's index, in its order: nothing else to read
            plan = _plan(pg_url, ledger_schema, _params(user, agent), mode)
            assert plan["Node Type"] == "Limit", (mode, user, agent, plan)
            scans = plan["Plans"]
            assert [(n["Node Type"], n.get("Index Name")) for n in scans] == [
                ("Index Scan", index)
            ], (mode, user, agent, plan)
            # the key's account, user, agent: conditions of the index, not a filter after it
            cond = scans[0]["Index Cond"]
            assert all(f"({c})" in cond for c in columns), (mode, user, agent, cond)

    # one connection, each list read 6 times: psycopg prepares its statement on the server
    # from the 5th, and a generic plan runs it from then on; the lists stay the same
    generic = make_conninfo(pg_url, options="-c plan_cache_mode=force_generic_plan")
    db = Database(generic, min_size=1, max_size=1)
    try:
        for _ in range(6):
            for user, agent in LISTS:
                listed = commits_of_owner(db, ledger_schema, "acme", user_id=user, agent_id=agent)
                assert [c.commit_id for c in listed] == _expected(user, agent), (user, agent)
        with db.connection() as conn:
            row = conn.execute(
                "SELECT current_setting('plan_cache_mode'), count(*) FROM pg_prepared_statements"
            ).fetchone()
        assert row == ("force_generic_plan", len(LISTS))
    finally:
        db.close()
