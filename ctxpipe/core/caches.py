"""Thread-safe access to a `cachetools` cache (the library's caches are not thread-safe):
every in-process cache of ctxpipe is one of these, with its bound and, where it has one, its
time to live, declared where it is built."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

import cachetools

V = TypeVar("V")


class LockedCache(Generic[V]):
    """`get`/`put`/`clear` on a cachetools cache under one lock."""

    def __init__(self, cache: cachetools.Cache[Hashable, V]) -> None:
        self._cache = cache
        self._lock = threading.Lock()

    @classmethod
    def lru(cls, maxsize: int) -> LockedCache[V]:
        return cls(cachetools.LRUCache(maxsize=maxsize))

    @classmethod
    def ttl(cls, maxsize: int, ttl_s: float) -> LockedCache[V]:
        return cls(cachetools.TTLCache(maxsize=maxsize, ttl=ttl_s))

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            return self._cache.get(key)

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._cache[key] = value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)


__all__ = ["LockedCache"]
