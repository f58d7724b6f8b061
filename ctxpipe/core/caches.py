"""Thread-safe access to a `cachetools` cache (the library's caches are not thread-safe):
every in-process cache of ctxpipe is one of these, with its bound and, where it has one, its
time to live, declared where it is built."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import cachetools

V = TypeVar("V")


class LockedCache(Generic[V]):
    """`get`/`put`/`clear` on a cachetools cache under one lock."""

    def __init__(self, cache: cachetools.Cache[Hashable, V]) -> None:
        self._cache = cache
        self._lock = threading.Lock()

    @classmethod
    def lru(cls, maxsize: int, getsizeof: Callable[[V], float] | None = None) -> LockedCache[V]:
        """Least recently used first out; `getsizeof` bounds the sum of the values' sizes
        instead of their number."""
        return cls(cachetools.LRUCache(maxsize=maxsize, getsizeof=getsizeof))

    @classmethod
    def ttl(cls, maxsize: int, ttl_s: float) -> LockedCache[V]:
        return cls(cachetools.TTLCache(maxsize=maxsize, ttl=ttl_s))

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            return self._cache.get(key)

    def get_many(self, keys: Iterable[Hashable]) -> dict[Hashable, V]:
        """The cached ones of `keys` (one lock for all)."""
        out: dict[Hashable, V] = {}
        with self._lock:
            for k in keys:
                v = self._cache.get(k)
                if v is not None:
                    out[k] = v
        return out

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            try:
                self._cache[key] = value
            except ValueError:  # one value larger than the whole bound: not cached
                self._cache.pop(key, None)

    def pop(self, key: Hashable) -> V | None:
        with self._lock:
            return self._cache.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    @property
    def currsize(self) -> float:
        """The sum of the held values' sizes (their number without a `getsizeof`)."""
        with self._lock:
            return self._cache.currsize

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)


__all__ = ["LockedCache"]
