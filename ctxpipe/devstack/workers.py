"""Throwaway Celery worker processes (tests and benchmarks): start one, wait until it is
ready, stop it with its whole process group. `ctxpipe dev` manages long-lived ones."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ctxpipe.core.config import Settings
from ctxpipe.devstack.env import child_env, project_root


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path, name: str) -> None:
        self.proc = proc
        self.log = log
        self.name = name

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        with suppress(ProcessLookupError):  # orphaned pool children left in the group
            os.killpg(self.proc.pid, signal.SIGKILL)


def start_worker(
    settings: Settings,
    queues: str,
    concurrency: int,
    logdir: Path,
    *,
    pool: str = "prefork",
    timeout: float = 60.0,
    app: str = "tasks.app",
) -> WorkerProcess:
    """`celery -A <app> worker -Q queues` (the project's app unless `app` names another module
    importable from the project root) with `settings` in its environment; returns once the
    worker logged that it is ready."""
    name = f"w-{uuid.uuid4().hex[:6]}@localhost"
    log = Path(logdir) / f"{name.split('@')[0]}.log"
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app,
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
        "INFO",  # task events as the settings say (`worker_task_events`)
    ]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=project_root(),
            env=child_env(settings),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = WorkerProcess(proc, log, name)
    deadline = time.monotonic() + timeout
    while "ready." not in worker.text():
        if proc.poll() is not None or time.monotonic() > deadline:
            worker.stop()
            raise RuntimeError(f"worker {name} did not start:\n{worker.text()[-3000:]}")
        time.sleep(0.2)
    return worker


@contextmanager
def workers(
    settings: Settings, logdir: Path, specs: list[tuple[str, int]]
) -> Iterator[list[WorkerProcess]]:
    """Start one worker per (queues, concurrency) spec; stop them all on exit."""
    started: list[WorkerProcess] = []
    try:
        for queues, conc in specs:
            started.append(start_worker(settings, queues, conc, logdir))
        yield started
    finally:
        for w in started:
            w.stop()
