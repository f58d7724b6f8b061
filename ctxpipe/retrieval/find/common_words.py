"""A scope's own stopwords: the lexemes more than `FindConfig.common_word_ratio` of its
chunks hold — such as the name of the person its memories are about, which every
third-person memory line and every archive line of theirs carries. `find` searches with such
a word in neither arm (`HybridFinder.dense_query`, `CandidateStore.text_arm`).

A scope is counted (one statement over at most `COMMON_SAMPLE_ROWS` of its rows) the first
time a process searches it; after `COMMON_REFRESH_S` it is counted again in the background
while finds go on with what was counted before."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from psycopg import sql

from ctxpipe.core.caches import LockedCache
from ctxpipe.core.text import stem
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

# a scope of fewer rows says too little about which words are common to most of them
COMMON_MIN_ROWS = 20
# rows a scope's common words are counted on: a word in more than half of them is told
# apart from one in 45 % at this size, and the count stays ~10-20 ms on a large scope
COMMON_SAMPLE_ROWS = 1000
# a scope's common words are counted again in the background this often (its names change
# slowly); a find never waits for that once the scope has been counted in the process
COMMON_REFRESH_S = 300.0

Where = Callable[[], tuple[sql.Composed, dict[str, Any]]]  # the scope's WHERE and params


def common_words(terms: Sequence[str], common: Collection[str]) -> set[str]:
    """The query terms whose lexeme is one of the scope's `common` lexemes — none when every
    term is (nothing would be left to search with)."""
    out = {t for t in terms if stem(t) in common}
    return set() if out >= set(terms) else out


class CommonLexemes:
    """The common lexemes of each scope searched, counted and recounted as above."""

    def __init__(self, db: Database, queries: Queries, ratio: float) -> None:
        self.db = db
        self.queries = queries
        self.ratio = ratio
        self.counted: LockedCache[frozenset[str]] = LockedCache.lru(1024)
        self.fresh: LockedCache[bool] = LockedCache.ttl(1024, COMMON_REFRESH_S)
        self._recount: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def of(self, key: Hashable, where: Where) -> frozenset[str]:
        """The common lexemes of the scope `key` (`where`: its WHERE clause, built when the
        scope is counted)."""
        if self.ratio <= 0:
            return frozenset()
        cached = self.counted.get(key)
        if cached is None:
            return self._count(key, where)
        if self.fresh.get(key) is None:
            self.fresh.put(key, True)  # one recount at a time
            self.recounter().submit(self._count, key, where)
        return cached

    def _count(self, key: Hashable, where: Where) -> frozenset[str]:
        clause, params = where()
        params.update(sample=COMMON_SAMPLE_ROWS, common_ratio=self.ratio)
        with self.db.autocommit() as conn:
            rows = conn.execute(
                sql.SQL(self.queries["retrieval_common_lexemes"]).format(where=clause), params
            ).fetchall()
        out = frozenset(str(lex) for lex, n in rows if int(n) >= COMMON_MIN_ROWS)
        self.counted.put(key, out)
        self.fresh.put(key, True)
        return out

    def recounter(self) -> ThreadPoolExecutor:
        """The one background thread that recounts scopes (made on first use: a forked
        worker makes its own)."""
        with self._lock:
            if self._recount is None:
                self._recount = ThreadPoolExecutor(1, thread_name_prefix="find-common-words")
            return self._recount

    def clear(self) -> None:
        self.counted.clear()
        self.fresh.clear()
