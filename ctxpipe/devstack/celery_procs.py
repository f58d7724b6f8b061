"""The processes of the dev stack: one Celery worker per queue, beat, Flower, the HTTP API.

All are started as `sys.executable -m celery -A tasks.app …` (the interpreter running ctxpipe,
never a hard-coded path). This module builds their command lines and readiness checks; it does
not import Celery (the library stays Celery-free; the CLI may pass an in-process probe).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ctxpipe.core.config import Settings
from ctxpipe.devstack.models import Kind

APP = "tasks.app"
BEAT_READY = "beat: Starting"

# Given node names, return those that are ready (their current process beats).
WorkerProbe = Callable[[list[str]], set[str]]


@dataclass(frozen=True)
class WorkerRole:
    """One worker role: its queue (the names of `tasks.queues`), pool and concurrency."""

    role: str
    pool: str
    concurrency: int

    @property
    def queue(self) -> str:
        return self.role


def worker_roles(concurrency: int = 2) -> list[WorkerRole]:
    """commit + extract: prefork; embed: solo (one per GPU, the model loads lazily after fork);
    maintenance: two prefork children, so a long repair or forgetting run never holds back
    the few-second reaper that re-drives the commits of dead workers."""
    return [
        WorkerRole("commit", "prefork", concurrency),
        WorkerRole("extract", "prefork", concurrency),
        WorkerRole("embed", "solo", 1),
        WorkerRole("maintenance", "prefork", 2),
    ]


@dataclass(frozen=True)
class ProcSpec:
    name: str
    kind: Kind
    argv: list[str]
    detail: str
    node: str | None = None
    port: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)


def celery_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", APP, *args]


def worker_spec(role: WorkerRole, hostname: str) -> ProcSpec:
    node = f"{role.role}@{hostname}"
    args = ["worker", "-Q", role.queue, "-n", node, f"--pool={role.pool}", "--loglevel=INFO"]
    detail = role.pool
    if role.pool != "solo":
        args.append(f"--concurrency={role.concurrency}")
        detail += f"×{role.concurrency}"
    return ProcSpec(f"worker-{role.role}", "worker", celery_argv(*args), detail, node=node)


def beat_spec(schedule_file: Path) -> ProcSpec:
    argv = celery_argv("beat", f"--schedule={schedule_file}", "--loglevel=INFO")
    return ProcSpec("beat", "beat", argv, "schedule in beat/")


def flower_spec(settings: Settings, address: str = "127.0.0.1") -> ProcSpec:
    password = settings.flower_password.get_secret_value()
    if not settings.flower_user or not password or ":" in settings.flower_user:
        raise ValueError(
            "Flower needs basic auth: set CTXPIPE_FLOWER_USER (no ':') and CTXPIPE_FLOWER_PASSWORD"
        )
    port = settings.flower_port
    argv = celery_argv("flower", f"--port={port}", f"--address={address}")
    return ProcSpec(
        "flower",
        "flower",
        argv,
        f"basic auth ({settings.flower_user})",
        port=port,
        # From the environment, not argv: `ps` would show the password.
        env={"FLOWER_BASIC_AUTH": f"{settings.flower_user}:{password}"},
    )


def api_spec(settings: Settings, address: str = "127.0.0.1") -> ProcSpec:
    """The HTTP API (`ctxpipe serve`) on `api_port`: part of the stack, so `dev down` stops it
    and a second `dev up` finds it instead of meeting a stale server on the port."""
    port = settings.api_port
    argv = [sys.executable, "-m", "ctxpipe", "serve", "--host", address, "--port", str(port)]
    return ProcSpec("api", "api", argv, f"http://{address}:{port}/docs", port=port)


__all__ = [
    "BEAT_READY",
    "api_spec",
    "ProcSpec",
    "WorkerProbe",
    "WorkerRole",
    "beat_spec",
    "celery_argv",
    "flower_spec",
    "worker_roles",
    "worker_spec",
]
