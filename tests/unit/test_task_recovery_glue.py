"""The Celery glue of recovery: a broker hiccup at task start is retried, not a failure, and
the commit a task message belongs to is read from its arguments."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from ctxpipe.commit import steps
from tasks import context
from tasks.commit import archive, plan
from tasks.recovery import commit_of


def test_a_redis_error_when_counting_the_delivery_is_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def down(*_a: Any, **_k: Any) -> int:
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(context, "count_delivery", down)
    archive.push_request(id="task-1", retries=0)
    try:
        with pytest.raises(steps.TransientStepError, match="Connection refused"):
            archive.guard("c-1")
    finally:
        archive.pop_request()
    # TransientStepError is what the task layer retries with backoff
    assert steps.TransientStepError in archive.autoretry_for
    assert steps.TransientStepError in plan.autoretry_for


def test_postgres_down_when_a_retried_task_records_its_attempt_is_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    class Ledger:
        def bump_attempt(self, *_a: Any) -> int:
            raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(context, "count_delivery", lambda *_a, **_k: 1)
    from tasks.commit import CommitTask

    monkeypatch.setattr(CommitTask, "ledger", lambda self: Ledger())
    archive.push_request(id="task-1", retries=2)  # a retry: its attempt is recorded first
    try:
        with pytest.raises(steps.TransientStepError, match="connection refused"):
            archive.guard("c-1")
    finally:
        archive.pop_request()


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("ctxpipe.commit.archive", ["c-1"], "c-1"),
        ("ctxpipe.commit.extract_profile", ["c-2"], "c-2"),
        ("ctxpipe.commit.plan", [[{"x": 1}, None], "c-3"], "c-3"),  # chord body
        ("ctxpipe.commit.start", ["c-4", "extract"], "c-4"),
        ("ctxpipe.commit.submit", [{"session_id": "s"}], None),  # not in the ledger yet
        ("ctxpipe.index.drain", [], None),
        ("ctxpipe.commit.write", [], None),
    ],
)
def test_commit_of_a_task_message(name: str, args: list[Any], expected: str | None) -> None:
    assert commit_of(name, args) == expected
