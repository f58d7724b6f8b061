"""Real Celery worker processes for end-to-end tests (no in-process fakes)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from ctxpipe.core.config import Settings
from ctxpipe.devstack.env import child_env
from ctxpipe.devstack.workers import WorkerProcess as Worker
from ctxpipe.devstack.workers import start_worker, workers

__all__ = ["Worker", "start_worker", "workers"]

ROOT = Path(__file__).resolve().parents[2]


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = child_env(settings)
    env.update(extra)
    return env


def ctxpipe(
    settings: Settings, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxpipe", *args],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def celery(settings: Settings, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`celery -A tasks.app ARGS…` against the stack of `settings`."""
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "tasks.app", *args],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def call_task(settings: Settings, name: str, args: list[Any]) -> None:
    """Send a task by name, as a redelivery by hand would."""
    out = celery(settings, "call", name, "--args", json.dumps(args))
    assert out.returncode == 0, out.stderr


SAMPLE_SESSION: dict[str, Any] = {
    "account_id": "acme",
    "user_id": "alice",
    "agent_id": "helper",
    "session_id": "s1",
    "messages": [
        {
            "id": "m1",
            "role": "user",
            "created_at": "2026-03-14T10:00:00Z",
            "content": "I'm a backend developer at Initech and I live in Lisbon.",
        },
        {"id": "m2", "role": "assistant", "content": "Nice! What are you working on?"},
        {
            "id": "m3",
            "role": "user",
            "content": "I prefer Go for services and I always write table-driven tests.",
        },
        {"id": "m4", "role": "assistant", "content": "Table-driven tests are a great habit."},
        {
            "id": "m5",
            "role": "user",
            "content": "Yesterday I shipped Project Falcon with my colleague Tom Baker.",
        },
    ],
}


def ledger_row(settings: Settings, commit_id: str) -> dict[str, Any] | None:
    with psycopg.connect(settings.database_url) as conn:
        row = conn.execute(
            "SELECT phase, status, error, extractors, result FROM ctx.commits WHERE commit_id = %s",
            (commit_id,),
        ).fetchone()
    if row is None:
        return None
    return {
        "phase": row[0],
        "status": row[1],
        "error": row[2],
        "extractors": row[3],
        "result": row[4],
    }


def wait_commit(settings: Settings, commit_id: str, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        row = ledger_row(settings, commit_id)
        if row and row["phase"] in ("registered", "failed"):
            return row
        if time.monotonic() > deadline:
            raise AssertionError(f"commit {commit_id} not finished: {row}")
        time.sleep(0.1)


def outbox_ids(settings: Settings) -> list[str]:
    with psycopg.connect(settings.database_url) as conn:
        return [r[0] for r in conn.execute("SELECT event_id FROM ctx.outbox_events").fetchall()]


def write_session(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
