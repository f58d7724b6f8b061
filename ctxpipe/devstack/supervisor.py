"""The dev stack's supervisor: restarts a worker, beat or Flower that died.

Celery workers need a process supervisor (systemd, Kubernetes, compose `restart:`): a node can
be SIGKILLed, run out of memory, or exit on a broker error it cannot recover from. `ctxpipe dev
up` starts this one as its own background process (`ctxpipe dev supervise`, recorded like the
others, stopped first by `dev down`). Every `interval` seconds, under the stack's lock (so it
never races `up`/`down`), each Celery process of the stack that is not alive is started again
with the same command line and environment, and its restart is counted in `run/restarts.json`
(`dev status` shows the counts). The servers (PostgreSQL, Redis) are not restarted: an outage
of theirs is the operator's to see, and every worker rides it out with retries.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from ctxpipe.devstack.celery_procs import ProcSpec
from ctxpipe.devstack.procs import ProcRecord

NAME = "supervisor"
RESTARTS_FILE = "restarts.json"


class Supervised(Protocol):
    """The stack whose processes are kept alive (`DevStack` is one)."""

    @property
    def specs(self) -> list[ProcSpec]: ...
    @property
    def run_dir(self) -> Path: ...
    def locked(self) -> AbstractContextManager[None]: ...
    def record(self, name: str) -> ProcRecord | None: ...
    def start_process(self, spec: ProcSpec) -> int: ...


def supervisor_spec(concurrency: int) -> ProcSpec:
    argv = [sys.executable, "-m", "ctxpipe", "dev", "supervise", f"--concurrency={concurrency}"]
    return ProcSpec(NAME, "supervisor", argv, "restarts dead workers, beat and Flower")


def restarts(run_dir: Path) -> dict[str, int]:
    try:
        data = json.loads((run_dir / RESTARTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def reset_restarts(run_dir: Path) -> None:
    (run_dir / RESTARTS_FILE).unlink(missing_ok=True)


def _count(run_dir: Path, name: str) -> None:
    counts = restarts(run_dir)
    counts[name] = counts.get(name, 0) + 1
    tmp = run_dir / f".{RESTARTS_FILE}.tmp"
    tmp.write_text(json.dumps(counts), encoding="utf-8")
    tmp.replace(run_dir / RESTARTS_FILE)


def check_once(stack: Supervised, log: bool = True) -> list[str]:
    """Start every supervised process that is not alive; returns their names."""
    started: list[str] = []
    with stack.locked():
        for spec in stack.specs:
            if stack.record(spec.name) is not None:
                continue
            stack.start_process(spec)
            _count(stack.run_dir, spec.name)
            started.append(spec.name)
            if log:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                print(f"{stamp} supervisor: {spec.name} was not running; restarted", flush=True)
    return started


def supervise(
    stack: Supervised, interval: float = 1.0, stop: threading.Event | None = None
) -> None:
    """Run until `stop` is set (or the process is terminated)."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            check_once(stack)
        except OSError as exc:  # a spawn failed (e.g. out of memory): try again next round
            print(f"supervisor: {exc}", file=sys.stderr, flush=True)
        stop.wait(interval)


__all__ = [
    "NAME",
    "Supervised",
    "check_once",
    "reset_restarts",
    "restarts",
    "supervise",
    "supervisor_spec",
]
