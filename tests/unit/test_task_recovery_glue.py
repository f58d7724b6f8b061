"""The Celery glue of recovery: a broker hiccup at task start is retried, not a failure, and
the commit a task message belongs to is read from its arguments."""

from __future__ import annotations

from typing import Any

import pytest

from ctxpipe.commit import steps
from tasks.commit import archive, plan
from tasks.recovery import commit_of


def test_postgres_down_when_a_task_reads_its_state_and_counts_its_delivery_is_transient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    class Ledger:
        def state(self, *_a: Any) -> Any:
            raise psycopg.OperationalError("connection refused")

    from tasks.commit import CommitTask

    monkeypatch.setattr(CommitTask, "ledger", lambda self: Ledger())
    monkeypatch.setattr(CommitTask, "components", lambda self: None)
    archive.push_request(id="task-1", retries=2)
    try:
        assert archive.delivery() == steps.Delivery("archive", 2)
        with pytest.raises(steps.TransientStepError, match="connection refused"):
            archive.run("c-1")
    finally:
        archive.pop_request()
    # TransientStepError is what the task layer retries with backoff
    assert steps.TransientStepError in archive.autoretry_for
    assert steps.TransientStepError in plan.autoretry_for


def test_a_message_the_broker_redelivered_is_counted_as_a_redelivery() -> None:
    """The broker flags a message it gives again after its worker process was lost without
    acknowledging it: only those count towards failing the commit as a poison task."""
    archive.push_request(id="task-1", retries=0, delivery_info={"redelivered": True})
    try:
        assert archive.delivery() == steps.Delivery("archive", 0, redelivered=True)
        assert archive.delivery().key == "archive#0 redelivered"
    finally:
        archive.pop_request()
    plan.push_request(id="task-2", retries=1, delivery_info={"routing_key": "commit"})
    try:
        assert plan.delivery() == steps.Delivery("plan", 1)
        assert plan.delivery().key == "plan#1"
    finally:
        plan.pop_request()


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("ctxpipe.commit.archive", ["c-1"], "c-1"),
        ("ctxpipe.commit.extract_profile", ["c-2"], "c-2"),
        ("ctxpipe.commit.plan", [[{"x": 1}, None], "c-3"], "c-3"),  # chord body
        ("ctxpipe.commit.prepare", ["c-5"], "c-5"),
        ("ctxpipe.commit.finish", ["c-6"], "c-6"),
        ("ctxpipe.commit.run", ["c-7"], "c-7"),
        ("ctxpipe.commit.start", ["c-4", "extract"], "c-4"),
        ("ctxpipe.commit.submit", [{"session_id": "s"}], None),  # not in the ledger yet
        ("ctxpipe.index.drain", [], None),
        ("ctxpipe.commit.write", [], None),
    ],
)
def test_commit_of_a_task_message(name: str, args: list[Any], expected: str | None) -> None:
    assert commit_of(name, args) == expected


def test_the_canvas_of_a_commit() -> None:
    """Celery runs the canvas data (`ctxpipe.commit.canvas`): by default a task per phase, the
    extractors as a chord whose body is the plan; the fused canvas is one task, `run`."""
    from tasks.commit import workflow

    def shape(sig: Any) -> str:
        if hasattr(sig, "body"):  # a chord: Celery folds the rest of the chain into its body
            return f"chord({shape(sig.tasks)}) -> {shape(sig.body)}"
        if isinstance(sig, list | tuple) or hasattr(sig, "tasks"):  # a chain or a group
            return ", ".join(shape(t) for t in getattr(sig, "tasks", sig))
        return str(sig.task).rsplit(".", 1)[-1]

    extract = "extract_profile, extract_preferences, extract_entity_event, extract_procedure"
    assert shape(workflow("c")) == f"archive, chord({extract}) -> plan, write, register"
    assert shape(workflow("c", "extract")) == f"chord({extract}) -> plan, write, register"
    assert shape(workflow("c", "write")) == "write, register"
    assert shape(workflow("c", "register")) == "register"
    assert shape(workflow("c", kind="fused")) == "run"
    assert shape(workflow("c", "extract", kind="fused")) == "run"
    assert shape(workflow("c", "write", kind="fused")) == "finish"
    with pytest.raises(ValueError, match="unknown start phase"):
        workflow("c", "nope")
