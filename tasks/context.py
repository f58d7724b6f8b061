"""Per-worker-process state: the Runtime (DB pool, model, FS) built lazily after fork."""

from __future__ import annotations

import os
import threading

import redis

from ctxpipe.core.config import Settings
from ctxpipe.fs.redis_lock import RedisOwnerLock
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger

_lock = threading.Lock()
_state: dict[str, object] = {}


def _fresh() -> bool:
    return _state.get("pid") == os.getpid()


def runtime(settings: Settings) -> Runtime:
    with _lock:
        if not _fresh():
            client = redis.Redis.from_url(settings.redis_url)
            _state.clear()
            _state["pid"] = os.getpid()
            _state["redis"] = client
            _state["runtime"] = Runtime(
                settings,
                lock=RedisOwnerLock(
                    client, ttl_s=settings.lock_ttl_s, default_timeout=settings.lock_timeout_s
                ),
            )
        return _state["runtime"]  # type: ignore[return-value]


def ledger(settings: Settings) -> CommitLedger:
    rt = runtime(settings)
    with _lock:
        if "ledger" not in _state:
            _state["ledger"] = CommitLedger(rt.db, schema=settings.db_schema)
        return _state["ledger"]  # type: ignore[return-value]


def redis_client(settings: Settings) -> redis.Redis:
    runtime(settings)
    return _state["redis"]  # type: ignore[return-value]
