"""Retry or fail: transient failures are recognised by type along the cause chain (a server
shutting down is retried; a schema error fails the commit at once instead of six retries)."""

from __future__ import annotations

import psycopg
import psycopg_pool
import pytest
import redis

from ctxpipe.commit import steps
from ctxpipe.core.errors import CommitError, LLMError, LockTimeoutError, StorageError


def wrapped(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),
        (psycopg.OperationalError("connection refused"), True),
        (psycopg_pool.PoolTimeout("couldn't get a connection after 5.00 sec"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (redis.ConnectionError("Connection refused"), True),
        (redis.TimeoutError("Timeout reading from socket"), True),
        (redis.BusyLoadingError("Redis is loading the dataset in memory"), True),
        (LockTimeoutError("acme/users/u", 30.0), True),
        (TimeoutError(), True),
        (LLMError("429 rate limited", transient=True), True),
        (LLMError("schema violated after 3 attempts"), False),
        (StorageError("cannot connect to PostgreSQL at u@h:5432/db"), True),
        (wrapped(StorageError("query failed"), psycopg.errors.UndefinedTable("no table")), False),
        (wrapped(StorageError("query failed"), psycopg.errors.AdminShutdown("shutdown")), True),
        (wrapped(RuntimeError("while writing"), redis.ConnectionError("reset")), True),
        (psycopg.errors.UndefinedTable('relation "ctx.commits" does not exist'), False),
        (psycopg.errors.UniqueViolation("duplicate key"), False),
        (ValueError("bad payload"), False),
        (None, False),
    ],
)
def test_is_transient(exc: BaseException | None, transient: bool) -> None:
    assert steps.is_transient(exc) is transient


def test_a_ledger_outage_around_a_phase_is_retried_not_a_crash() -> None:
    @steps.transient_as_retry("plan")
    def plan_step() -> None:  # the ledger read before the phase hits a stopping PostgreSQL
        raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")

    with pytest.raises(steps.TransientStepError, match="transient failure in plan"):
        plan_step()


def test_permanent_errors_pass_through_the_step_decorator() -> None:
    @steps.transient_as_retry("write")
    def write_step() -> None:
        raise CommitError("node conflict", phase="write")

    with pytest.raises(CommitError, match="node conflict"):
        write_step()

    @steps.transient_as_retry("write")
    def broken() -> None:
        raise psycopg.errors.UndefinedTable("no table")

    with pytest.raises(psycopg.errors.UndefinedTable):
        broken()
