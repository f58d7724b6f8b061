"""A throwaway local stack for benchmarks: PostgreSQL + Redis on free ports, real workers."""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.core.config import Settings  # noqa: E402
from ctxpipe.devstack.env import child_env  # noqa: E402
from ctxpipe.devstack.workers import WorkerProcess, start_worker  # noqa: E402
from ctxpipe.storage.embedded_pg import start_postgres, stop_postgres  # noqa: E402
from ctxpipe.storage.migrations import migrate  # noqa: E402
from ctxpipe.storage.netutil import free_port  # noqa: E402
from ctxpipe.storage.redis_server import start_redis, stop_redis  # noqa: E402


def env_for(settings: Settings) -> dict[str, str]:
    return child_env(settings)


def release_result_handles(module: str = "tasks.app") -> None:
    """Let the results awaited through the Celery app of `module` (when it is loaded)
    unsubscribe from Redis now, while it still runs, not at interpreter exit."""
    if module not in sys.modules:
        return
    backend = sys.modules[module].app.backend
    for mapping in getattr(backend, "_pending_results", ()):  # Celery keeps no public list
        for waiters in list(mapping.values()):
            for result in list(waiters.values()):
                backend.remove_pending_result(result)


@contextmanager
def local_stack(workers: list[tuple[str, int]], **overrides: Any) -> Iterator[Settings]:
    """Servers + workers; the settings are exported to this process's env before yielding,
    so `tasks.app` (imported afterwards) talks to the same broker."""
    tmp = Path(tempfile.mkdtemp(prefix="ctxpipe-bench-"))
    pg_url = start_postgres(tmp / "pg", free_port())
    redis_url = start_redis(tmp / "redis", free_port())
    settings = Settings(
        fs_root=tmp / "fs",
        var_dir=tmp / "var",
        database_url=pg_url,
        redis_url=redis_url,
        **overrides,
    )
    migrate(pg_url, schema=settings.db_schema, embedding_dim=settings.embedding_dim)
    settings.fs_root.mkdir(parents=True)
    settings.var_dir.mkdir(parents=True)
    os.environ.update(
        {
            k: v
            for k, v in env_for(settings).items()
            if k.startswith(("CTXPIPE_", "HF_", "TRANSFORMERS_"))
        }
    )
    procs: list[WorkerProcess] = []
    try:
        for queues, conc in workers:
            procs.append(start_worker(settings, queues, conc, tmp))
        yield settings
    finally:
        # result handles of `.get()` unsubscribe from Redis in __del__: let them do it now,
        # while Redis still runs, not at interpreter exit
        release_result_handles()
        gc.collect()
        for p in procs:
            p.stop()
        stop_redis(tmp / "redis")
        stop_postgres(tmp / "pg")
        shutil.rmtree(tmp, ignore_errors=True)


def stack_cpu_s(settings: Settings) -> float:
    """CPU seconds (user + system) used so far by the whole local stack: this process, its
    worker processes and their pool children, PostgreSQL (every backend) and Redis. On a
    shared machine wall time depends on the neighbours; CPU per commit does much less."""
    import psutil

    root = Path(settings.var_dir).parent
    procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
    for pidfile in (root / "pg" / "postmaster.pid", root / "redis" / "redis.pid"):
        try:
            server = psutil.Process(int(pidfile.read_text().split()[0]))
            procs += [server, *server.children(recursive=True)]
        except (OSError, ValueError, IndexError, psutil.Error):
            continue
    total = 0.0
    for proc in {p.pid: p for p in procs}.values():
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def sample_session(i: int, user: str | None = None) -> dict[str, Any]:
    """A realistic small session; varied per index so commits are not identical."""
    topics = ["Rust", "Go", "Python", "Kotlin", "Elixir", "TypeScript"]
    cities = ["Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Lima"]
    t, c = topics[i % len(topics)], cities[i % len(cities)]
    return {
        "account_id": "bench",
        "user_id": user or f"user{i}",
        "agent_id": "helper",
        "session_id": f"s{i}" if user is None else f"{user}-s{i}",  # a session has one owner
        "commit_id": f"bench-{uuid.uuid4().hex[:12]}",
        "messages": [
            {
                "id": "m1",
                "role": "user",
                "created_at": "2026-03-14T10:00:00Z",
                "content": f"I'm a platform engineer at Contoso and I live in {c}.",
            },
            {"id": "m2", "role": "assistant", "content": "Nice to meet you! How can I help?"},
            {
                "id": "m3",
                "role": "user",
                "content": f"I prefer {t} for backend services and I always pin dependencies.",
            },
            {"id": "m4", "role": "assistant", "content": f"{t} is a solid choice."},
            {
                "id": "m5",
                "role": "user",
                "content": f"Last Friday I demoed Project Nimbus to my manager Dana Scott in {c}.",
            },
        ],
    }
