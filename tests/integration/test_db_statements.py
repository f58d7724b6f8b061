"""How pooled connections run statements: every statement planned for its own parameters
(psycopg prepares a statement run five times, and PostgreSQL may then switch it to one generic
plan for every parameter — for find on a multi-tenant table, one plan for a small owner and the
whole account alike), and a statement sent ahead that the server runs while the caller works."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import tuple_row

from ctxpipe.core.errors import StorageError
from ctxpipe.storage.db import Database
from ctxpipe.storage.pipelined import NoIdleConnection, SentStatement

STATEMENT = "SELECT count(*) FROM pg_class AS plan_probe WHERE plan_probe.oid = %(n)s"


def _run_twenty_times(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """(generic plans, custom plans) of STATEMENT after twenty runs, as the server counts them
    (psycopg prepares it at its sixth; the server plans the first five runs of a prepared
    statement for their parameters and then weighs a generic plan)."""
    for n in range(20):
        conn.execute(STATEMENT, {"n": n}).fetchone()
    row = conn.execute(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%%plan_probe%%'"
    ).fetchone()
    assert row is not None, "psycopg did not prepare the statement"
    return int(row[0]), int(row[1])


def test_pooled_connections_never_switch_a_prepared_statement_to_a_generic_plan(
    pg_url: str,
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as plain:  # what the pool's setting prevents
        generic, _ = _run_twenty_times(plain)
        assert generic > 0
    db = Database(pg_url, min_size=1, max_size=1)
    try:
        with db.autocommit() as conn:
            generic, custom = _run_twenty_times(conn)
            assert (generic, custom) == (0, custom) and custom >= 10
        with db.connection() as conn:
            assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_custom_plan",)
    finally:
        db.close()
    # a mode the connection asks for itself is kept, the server's own `auto` too
    for mode in ("force_generic_plan", "auto"):
        asked = Database(make_conninfo(pg_url, options=f"-c plan_cache_mode={mode}"))
        try:
            with asked.autocommit() as conn:
                assert conn.execute("SHOW plan_cache_mode").fetchone() == (mode,)
        finally:
            asked.close()


def test_a_sent_statement_runs_while_the_caller_works_and_gives_its_connection_back(
    pg_url: str,
) -> None:
    db = Database(pg_url, min_size=1, max_size=1)
    query = sql.SQL("SELECT pg_sleep(0.3), %(x)s::int AS x")
    try:
        with db.autocommit() as conn:  # the pool's connection made, outside the timing
            conn.execute("SELECT 1")
        started = time.perf_counter()
        sent = SentStatement(db, query, {"x": 7}, tuple_row, "the probe")
        assert time.perf_counter() - started < 0.25  # on the wire, not waited for
        time.sleep(0.3)  # the caller's own work (find: the question's embedding)
        assert [r[1] for r in sent.rows()] == [7]
        assert time.perf_counter() - started < 0.55  # the two 0.3 s overlapped (not 0.6)
        with pytest.raises(RuntimeError, match="read already"):
            sent.rows()
        with db.autocommit() as conn:  # the one pooled connection is back
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with SentStatement(db, query, {"x": 8}, tuple_row, "the probe"):
            pass  # left unread: given back all the same
        with db.connection() as conn:
            assert conn.execute("SELECT 2").fetchone() == (2,)
    finally:
        db.close()


def test_a_sent_statements_rows_come_to_the_client_without_being_asked_for(
    pg_url: str,
) -> None:
    """A pipeline's results wait in the server until the client asks it to flush: the flush
    request goes with the statement, so the rows are on this side of the socket by the time
    the caller reads them (no round trip at the read)."""
    db = Database(pg_url, min_size=1, max_size=1)
    try:
        sent = SentStatement(db, sql.SQL("SELECT %(x)s::int"), {"x": 5}, tuple_row, "the probe")
        pgconn = sent._cur.connection.pgconn
        deadline = time.perf_counter() + 5
        while pgconn.is_busy() and time.perf_counter() < deadline:
            time.sleep(0.01)
            pgconn.consume_input()  # what arrived: nothing is sent
        assert not pgconn.is_busy()  # the result is here before anyone asked for it
        assert sent.rows() == [(5,)]
    finally:
        db.close()


def test_a_statement_sent_only_if_a_connection_is_idle_never_waits_for_one(
    pg_url: str,
) -> None:
    """A caller that holds a connection and wants a second for optional work takes one the
    pool has idle or none: two such callers waiting for each other's second connection
    would wait until the pool's timeout."""
    db = Database(pg_url, min_size=1, max_size=1)
    query = sql.SQL("SELECT %(x)s::int")
    try:
        with db.autocommit() as held:
            started = time.perf_counter()
            with pytest.raises(NoIdleConnection):
                SentStatement(db, query, {"x": 1}, tuple_row, "the probe", wait=False)
            with db.idle_autocommit() as none:
                assert none is None
            assert time.perf_counter() - started < 1.0  # not the pool's 30 s
            assert held.execute("SELECT 1").fetchone() == (1,)
        sent = SentStatement(db, query, {"x": 2}, tuple_row, "the probe", wait=False)
        assert sent.rows() == [(2,)]
        with db.idle_autocommit() as idle:
            assert idle is not None and idle.execute("SELECT 3").fetchone() == (3,)
    finally:
        db.close()


def test_a_sent_statement_that_fails_names_itself_and_leaves_the_pool_usable(
    pg_url: str,
) -> None:
    db = Database(pg_url, min_size=1, max_size=1)
    try:
        sent = SentStatement(
            db, sql.SQL("SELECT 1 / %(x)s::int"), {"x": 0}, tuple_row, "the division"
        )
        with pytest.raises(StorageError, match="the division failed: division by zero"):
            sent.rows()
        with db.autocommit() as conn:
            assert conn.execute("SELECT 3").fetchone() == (3,)
    finally:
        db.close()
