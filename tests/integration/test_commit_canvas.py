"""The commit canvas on Celery: the real tasks (`tasks.commit`) on an in-process worker
(`celery.contrib.pytest`'s `celery_worker`, a solo worker in a thread) against the suite's
Redis and PostgreSQL. Every phase runs as its own task, the extractors as a chord whose body is
the plan; a re-drive resumes from the ledger's phase; the fused canvas ends in the same FS; and
the in-process executor (`CommitCoordinator`) writes what the workers write."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.commit import canvas, steps
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.models import CommitResult
from ctxpipe.core.queues import COMMIT, EXTRACT
from ctxpipe.core.session import SessionInput
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger, LedgerRow

pytest_plugins = ("celery.contrib.pytest",)

SESSION = {
    "account_id": "acme",
    "user_id": "alice",
    "agent_id": "helper",
    "session_id": "canvas-1",
    "messages": [
        {"id": "m1", "role": "user", "content": "I moved to Lisbon last spring for a new job."},
        {"id": "m2", "role": "assistant", "content": "Congratulations! How is Lisbon?"},
        {"id": "m3", "role": "user", "content": "I prefer green tea over coffee in the morning."},
        {"id": "m4", "role": "assistant", "content": "Noted: green tea in the morning."},
    ],
}


def request(commit_id: str, session_id: str = "canvas-1") -> CommitRequest:
    session = SessionInput.model_validate({**SESSION, "session_id": session_id})
    return CommitRequest.from_session(session, commit_id=commit_id)


def _point(app: Any, settings: Settings) -> None:
    """Point the application (imported once per test process) at these settings' servers:
    its broker, its result backend and the runtime its tasks build, dropping what it cached."""
    from tasks import context

    app.conf.update(broker_url=settings.redis_url, result_backend=settings.redis_url)
    app.conf.ctxpipe_settings = settings
    app._pool = None
    app.amqp._producer_pool = None  # its connections still point at the previous broker
    app._backend_cache = None
    app._local = threading.local()
    context._state.clear()


@pytest.fixture(scope="session")
def celery_worker_parameters() -> dict[str, Any]:
    # the commit queues only (no embed worker here); no `celery.ping` round trip
    return {"queues": [COMMIT, EXTRACT], "perform_ping_check": False}


@pytest.fixture
def canvas_settings(make_settings: Callable[..., Settings], clean_db: str) -> Settings:
    return make_settings()


@pytest.fixture
def celery_app(canvas_settings: Settings, clean_redis: str) -> Iterator[Any]:
    """The application itself (`tasks.app.app`, every commit task registered), not a test app."""
    from tasks import context, recovery
    from tasks.app import app

    before = app.conf.ctxpipe_settings
    _point(app, canvas_settings)
    yield app
    rt = context._state.get("runtime")
    if isinstance(rt, Runtime):
        rt.close()
    _point(app, before)
    recovery._node["incarnation"] = None  # this process is no worker after the test


def _wait(ledger: CommitLedger, commit_id: str, timeout: float = 60.0) -> LedgerRow:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = ledger.get(commit_id)
        if row is not None and row.phase in ("registered", "failed"):
            return row
        time.sleep(0.05)
    raise AssertionError(f"commit {commit_id} did not finish: {ledger.get(commit_id)}")


def _tasks_run(row: LedgerRow) -> set[str]:
    """The tasks that ran a step of the commit: each counts its delivery ("plan#0")."""
    return {key.split("#")[0] for key in row.attempts if "#" in key}


def test_a_commit_runs_each_phase_as_its_own_task(
    celery_app: Any, celery_worker: Any, canvas_settings: Settings
) -> None:
    from tasks.dispatcher import CeleryDispatcher

    rt = Runtime(canvas_settings)
    ledger = CommitLedger(rt.db)
    # the producer's path: a ledger row and one start message; the worker builds the canvas
    CeleryDispatcher(canvas_settings, rt.db).submit(request("cv-1"))
    row = _wait(ledger, "cv-1")
    assert row.phase == "registered" and row.status == "success", row.error
    assert _tasks_run(row) == set(canvas.step_names(canvas.canvas()))
    assert all(n == 1 for n in row.attempts.values())  # each delivered once
    assert {f"extract_{n}_ms" for n in ("profile", "preferences")} <= set(row.timings)

    # the in-process executor writes what the workers wrote (another FS root, same canvas)
    other = canvas_settings.model_copy(update={"fs_root": canvas_settings.fs_root.parent / "b"})
    other.fs_root.mkdir()
    inproc = Runtime(other)
    local = CommitCoordinator(inproc.components()).commit_sync(request("cv-1"))
    inproc.close()
    assert row.result is not None
    remote = CommitResult.model_validate(row.result)
    assert [w.uri for w in remote.write_results] == [w.uri for w in local.write_results]
    assert _files(canvas_settings.fs_root) == _files(other.fs_root)
    rt.close()


def _files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".lock" not in p.name
    )


def test_a_redrive_resumes_from_the_ledger_phase(
    celery_app: Any, celery_worker: Any, canvas_settings: Settings
) -> None:
    """A commit whose archive ran (then its worker was lost) is re-driven from `extract`:
    the chord, plan, write and register run; the archive is not run again."""
    from tasks.commit import workflow

    rt = Runtime(canvas_settings)
    ledger = CommitLedger(rt.db)
    req = request("cv-2", "canvas-2")
    steps.submit(ledger, req)
    steps.archive_step(rt.components(), ledger, "cv-2", steps.Delivery("archive"))
    row = ledger.get("cv-2")
    assert row is not None and row.phase == "archived"
    start = steps.resume_point(row.phase)
    assert start == "extract"
    workflow("cv-2", start).apply_async().get(timeout=60)
    row = _wait(ledger, "cv-2")
    assert row.phase == "registered"
    assert row.attempts.get("archive#0") == 1  # the one before the loss, no other
    # a re-drive of a finished commit replays the stored outputs and changes nothing
    before = ledger.get("cv-2")
    workflow("cv-2", "extract").apply_async().get(timeout=60)
    after = ledger.get("cv-2")
    assert before is not None and after is not None and after.result == before.result
    rt.close()


def test_the_fused_canvas_is_one_task(
    celery_app: Any, celery_worker: Any, canvas_settings: Settings
) -> None:
    from tasks.commit import workflow

    rt = Runtime(canvas_settings)
    ledger = CommitLedger(rt.db)
    steps.submit(ledger, request("cv-3", "canvas-3"))
    out = workflow("cv-3", kind="fused").apply_async().get(timeout=60)
    assert CommitResult.model_validate(out).status.value == "success"
    row = ledger.get("cv-3")
    assert row is not None and row.phase == "registered"
    # `run` counts the deliveries of the steps it runs: no extractor got a task
    assert _tasks_run(row) == {"prepare", "write", "register"}
    rt.close()


def test_only_the_results_someone_reads_are_stored(
    celery_app: Any, celery_worker: Any, canvas_settings: Settings
) -> None:
    """The extractors' results (they count the chord's completion) and the last step's (the
    workflow's result) are stored on the result backend; archive, plan and write, whose
    results nobody reads, store none."""
    from tasks.commit import workflow

    rt = Runtime(canvas_settings)
    ledger = CommitLedger(rt.db)
    steps.submit(ledger, request("cv-4", "canvas-4"))
    client = celery_app.backend.client
    before = set(client.keys("celery-task-meta-*"))
    out = workflow("cv-4").apply_async().get(timeout=60)
    assert CommitResult.model_validate(out).status.value == "success"
    stored = [client.get(k) for k in set(client.keys("celery-task-meta-*")) - before]
    assert len(stored) == len(canvas.EXTRACT) + 1  # the four extractors and register
    rt.close()
