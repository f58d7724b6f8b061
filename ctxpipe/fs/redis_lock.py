"""RedisOwnerLock: the owner-space lock across machines.

A Redis lock with an expiry (so a crashed holder cannot block an owner forever), renewed while
held. Expiry means two holders can overlap after a long stall; the ContextFS version check
(`write_node(expected_version=...)`) is the fence that still refuses the stale writer.

A worker node names itself the *holder* of the locks its processes take (`set_holder`: its
incarnation, inherited by the pool processes it forks): each lock's value starts with the
holder, and the holder's set of held locks (key and token of each hold) is kept beside them.
When the node dies, the reaper frees what it held at once (`release_held_by`), instead of
leaving the owner's next commits to wait out the expiry.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from typing import cast

import redis
from redis.exceptions import LockError

from ctxpipe.core.errors import LockTimeoutError

HELD_PREFIX = "ctxpipe:locks-held:"
HELD_TTL_S = 7 * 24 * 3600  # the held set of a holder never reaped (a node that died unseen)
_HOLDER = {"id": ""}

# delete the lock only while it is still that hold's (a lock that expired and was taken by
# another is left alone)
_RELEASE_IF_HELD = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def set_holder(holder: str) -> None:
    """Name this process — and the pool processes it forks afterwards — as the holder of the
    locks it takes: a worker node's incarnation, so that the reaper can free the locks of a
    dead one. Empty: anonymous (locks then only expire)."""
    _HOLDER["id"] = holder


def release_held_by(client: redis.Redis, holder: str) -> int:
    """Free every lock `holder` (a dead worker incarnation) still holds; how many were freed."""
    held = HELD_PREFIX + holder
    holds = cast(set[bytes], client.smembers(held))
    freed = 0
    if holds:
        release = client.register_script(_RELEASE_IF_HELD)
        for entry in sorted(holds):
            key, token = json.loads(entry)
            freed += int(cast(int, release(keys=[key], args=[token])))
    client.delete(held)
    return freed


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
        name, holder = self._prefix + key, _HOLDER["id"]
        lock = self._client.lock(
            name,
            timeout=self._ttl,
            blocking=True,
            blocking_timeout=wait,
            thread_local=False,
        )
        token = f"{holder}#{uuid.uuid4().hex}" if holder else None
        # one entry per hold: a release of this key by another process of the node, racing
        # with this acquisition, removes its own entry, never this one
        entry = json.dumps([name, token])
        if not lock.acquire(token=token):
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
            if holder:  # inside: a failure here still releases the lock
                pipe = self._client.pipeline(transaction=False)
                pipe.sadd(HELD_PREFIX + holder, entry)
                pipe.expire(HELD_PREFIX + holder, HELD_TTL_S)
                pipe.execute()
            yield
        finally:
            stop.set()
            keeper.join(timeout=1)
            with contextlib.suppress(LockError):
                lock.release()
            if holder:
                with contextlib.suppress(redis.RedisError):
                    self._client.srem(HELD_PREFIX + holder, entry)
