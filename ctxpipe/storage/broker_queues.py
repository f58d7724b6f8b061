"""Depths of the Celery queues on a Redis broker (one ``LLEN`` per list, one round trip), and
the tasks waiting in them."""

from __future__ import annotations

import base64
import json
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


# the most waiting messages read at once (~1–2 KB each): the reaper reads them every few
# seconds while a commit is quiet; past it, a lost task is left to the stuck-commit sweeper
WAITING_READ_LIMIT = 2_000


def waiting_tasks(
    client: Any, queues: Sequence[str], limit: int = WAITING_READ_LIMIT
) -> list[tuple[str, list[Any]]] | None:
    """The tasks whose messages wait in `queues` (every priority list): each task's name and
    positional arguments, read from the messages as kombu's Redis transport stores them (a
    JSON envelope, the body a JSON `[args, kwargs, embed]`, base64-encoded or not). None when
    more than `limit` messages wait (too many to read every few seconds). A message that is
    not a task message of protocol 2 is left out."""
    if sum(queue_depths("", queues, client).values()) > limit:
        return None
    pipe = client.pipeline()
    for name in (q + suffix for q in queues for suffix in _PRIORITY_SUFFIXES):
        pipe.lrange(name, 0, limit)
    out: list[tuple[str, list[Any]]] = []
    for raw in (m for found in pipe.execute() for m in found):
        task = _task_of(raw)
        if task is not None:
            out.append(task)
    return out


def _task_of(raw: bytes | str) -> tuple[str, list[Any]] | None:
    try:
        envelope = json.loads(raw)
        name = envelope["headers"]["task"]
        body = envelope["body"]
        if envelope.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return (name, args) if isinstance(name, str) and isinstance(args, list) else None


__all__ = ["COMMIT_PATH_QUEUES", "WAITING_READ_LIMIT", "queue_depths", "waiting_tasks"]
