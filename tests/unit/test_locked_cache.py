"""The one in-process cache of ctxpipe: bounded by count or by the size of what it holds,
least recently used out first, safe to share between the threads of a worker."""

from __future__ import annotations

import threading

from ctxpipe.core.caches import LockedCache


def test_lru_keeps_the_recently_used_within_its_bound() -> None:
    cache: LockedCache[int] = LockedCache.lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_a_size_bound_counts_what_the_values_hold() -> None:
    cache: LockedCache[list[int]] = LockedCache.lru(10, getsizeof=len)
    cache.put("six", [0] * 6)
    cache.put("three", [0] * 3)
    assert cache.currsize == 9
    cache.put("four", [0] * 4)  # 13 > 10: the oldest goes
    assert cache.get("six") is None and cache.currsize == 7


def test_a_value_larger_than_the_bound_is_not_cached_and_nothing_breaks() -> None:
    cache: LockedCache[list[int]] = LockedCache.lru(4, getsizeof=len)
    cache.put("k", [0])
    cache.put("k", [0] * 5)  # too large: the stale value must not stay either
    assert cache.get("k") is None and cache.currsize == 0


def test_get_many_returns_only_the_cached_keys() -> None:
    cache: LockedCache[str] = LockedCache.lru(8)
    cache.put(1, "one")
    cache.put(3, "three")
    assert cache.get_many([1, 2, 3]) == {1: "one", 3: "three"}


def test_ttl_entries_expire() -> None:
    now = [0.0]
    import cachetools

    cache: LockedCache[str] = LockedCache(cachetools.TTLCache(8, ttl=5, timer=lambda: now[0]))
    cache.put("k", "v")
    now[0] = 4.0
    assert cache.get("k") == "v"
    now[0] = 6.0
    assert cache.get("k") is None


def test_threads_share_it_without_exceeding_the_bound() -> None:
    cache: LockedCache[int] = LockedCache.lru(100)

    def work(base: int) -> None:
        for i in range(2000):
            cache.put((base, i), i)
            cache.get((base, i // 2))

    threads = [threading.Thread(target=work, args=(b,)) for b in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 100
