"""Real Celery worker processes for end-to-end tests (no in-process fakes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from ctxpipe.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPIPE_")}
    env.update(
        {
            "CTXPIPE_FS_ROOT": str(settings.fs_root),
            "CTXPIPE_DATABASE_URL": settings.database_url,
            "CTXPIPE_REDIS_URL": settings.redis_url,
            "CTXPIPE_VAR_DIR": str(settings.var_dir),
            "CTXPIPE_LLM_SIMULATED_LATENCY_S": str(settings.llm_simulated_latency_s),
            "CTXPIPE_STUCK_COMMIT_AFTER_S": str(settings.stuck_commit_after_s),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class Worker:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path, name: str) -> None:
        self.proc = proc
        self.log = log
        self.name = name

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        else:
            try:  # reap any orphaned pool children left in the group
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def start_worker(
    settings: Settings,
    queues: str,
    concurrency: int,
    logdir: Path,
    pool: str = "prefork",
    **env: str,
) -> Worker:
    name = f"e2e-{uuid.uuid4().hex[:6]}@localhost"
    log = logdir / f"{name.split('@')[0]}.log"
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "tasks.app",
        "worker",
        "-Q",
        queues,
        "-c",
        str(concurrency),
        "-P",
        pool,
        "-n",
        name,
        "--without-gossip",
        "--without-mingle",
        "-l",
        "INFO",
        "-E",
    ]
    fh = open(log, "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=settings_env(settings, **env),
        stdout=fh,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    w = Worker(proc, log, name)
    deadline = time.monotonic() + 60
    while "ready." not in w.text():
        if proc.poll() is not None or time.monotonic() > deadline:
            w.stop()
            raise RuntimeError(f"worker {name} did not start:\n{w.text()[-3000:]}")
        time.sleep(0.2)
    return w


@contextmanager
def workers(
    settings: Settings, logdir: Path, specs: list[tuple[str, int]], **env: str
) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    try:
        for queues, conc in specs:
            started.append(start_worker(settings, queues, conc, logdir, **env))
        yield started
    finally:
        for w in started:
            w.stop()


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
