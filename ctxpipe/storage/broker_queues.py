"""Depths of the Celery queues on a Redis broker (one ``LLEN`` per list, one round trip)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# kombu's Redis transport keeps priorities 3/6/9 of a queue in sibling lists.
_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")

COMMIT_PATH_QUEUES = ("commit", "extract")


def queue_depths(redis_url: str, queues: Sequence[str], client: Any = None) -> dict[str, int]:
    """Messages waiting per queue. `client`: a redis client to reuse (else one is opened)."""
    import redis

    own = client is None
    if own:
        client = redis.Redis.from_url(redis_url, socket_connect_timeout=3, socket_timeout=3)
    try:
        pipe = client.pipeline()
        for q in queues:
            for suffix in _PRIORITY_SUFFIXES:
                pipe.llen(q + suffix)
        counts = pipe.execute()
    finally:
        if own:
            client.close()
    n = len(_PRIORITY_SUFFIXES)
    return {q: int(sum(counts[i * n : (i + 1) * n])) for i, q in enumerate(queues)}


__all__ = ["COMMIT_PATH_QUEUES", "queue_depths"]
