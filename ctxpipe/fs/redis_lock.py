"""RedisOwnerLock: the owner-space lock across machines.

A Redis lock with an expiry (so a crashed holder cannot block an owner forever), renewed while
held. Expiry means two holders can overlap after a long stall; the ContextFS version check
(`write_node(expected_version=...)`) is the fence that still refuses the stale writer.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import redis
from redis.exceptions import LockError

from ctxpipe.core.errors import LockTimeoutError


class RedisOwnerLock:
    def __init__(
        self,
        client: redis.Redis,
        *,
        ttl_s: float = 120.0,
        default_timeout: float = 30.0,
        prefix: str = "ctxpipe:lock:",
    ) -> None:
        self._client = client
        self._ttl = ttl_s
        self._timeout = default_timeout
        self._prefix = prefix

    @classmethod
    def from_url(cls, url: str, **kw: float) -> RedisOwnerLock:
        return cls(redis.Redis.from_url(url), **kw)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def hold(self, key: str, timeout: float | None = None) -> Iterator[None]:
        wait = self._timeout if timeout is None else timeout
        lock = self._client.lock(
            self._prefix + key,
            timeout=self._ttl,
            blocking=True,
            blocking_timeout=wait,
            thread_local=False,
        )
        if not lock.acquire():
            raise LockTimeoutError(key, wait)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self._ttl / 3):
                try:
                    lock.reacquire()
                except LockError:
                    return

        keeper = threading.Thread(target=renew, name=f"lock-renew:{key}", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            stop.set()
            keeper.join(timeout=1)
            with contextlib.suppress(LockError):
                lock.release()
