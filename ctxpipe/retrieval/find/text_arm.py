"""The full-text arm of `find` and the scope statistics it needs, on the index replica.

BM25-style ranking over the ``tsv`` column: the IDF of each query term within the scope
(document frequencies counted once per term and scope — exactly in a small scope, on a sample
of ``df_sample_rows`` rows in a large one — then cached briefly), binary term frequency, length
normalisation. In a large scope it reads only the chunks that contain a selective term
(document frequency at most ``text_max_df_ratio`` of the scope; the two rarest terms when none
is), at most ``text_max_rows`` of them, so a common word never makes it rank a large part of
the account. A small scope not seen lately gets its statistics with its text arm in one
statement (``retrieval_text_arm_cold``).

The arm needs no query vector: `send_text_arm` puts its statement on the wire (pipeline mode,
`storage.pipelined`) and returns at once, so PostgreSQL ranks the text while the caller embeds
the question; `PendingTextArm.result()` reads it.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql
from psycopg.rows import tuple_row

from ctxpipe.core.caches import LockedCache
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.common_words import CommonLexemes, common_words
from ctxpipe.retrieval.models import FindFilters
from ctxpipe.retrieval.units.lexical import bm25_idf, query_terms, tsquery_or
from ctxpipe.storage.chunk_sql import ChunkScope, chunk_where
from ctxpipe.storage.db import Database
from ctxpipe.storage.pipelined import Pending, SentStatement
from ctxpipe.storage.queries import Queries

_BM25_K1 = 1.2
_BM25_B = 0.75


def build_where(
    filters: FindFilters, *, scope_only: bool = False
) -> tuple[sql.Composed, dict[str, Any]]:
    """WHERE clause over ``c`` (context_chunks) for `filters`, and its parameters.
    `scope_only`: just account + owner spaces (what the plan-choice count uses)."""
    return chunk_where(
        ChunkScope(
            account_id=filters.account_id,
            owner_spaces=filters.owner_spaces,
            context_types=filters.context_types,
            categories=filters.categories,
            parent_uris=filters.parent_uris,
            uris=filters.uris,
            levels=filters.levels,
            uri_prefixes=filters.uri_prefixes,
        ),
        scope_only=scope_only,
    )


ChunkSource = tuple[str, tuple[str, ...], str]  # a chunk's text, refs and context type


@dataclass
class TextArm:
    plan: str
    scope_rows: int
    idf: dict[str, float] = field(default_factory=dict)
    text_terms: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # best first
    scores: list[float] = field(default_factory=list)
    # what the ranked chunks say, as the candidates' rows will (from both statements):
    # split into lines and sentences while the fused statement runs
    sources: list[ChunkSource] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # each ranked chunk's node version

    def read(self, rows: Iterable[Sequence[Any]]) -> None:
        """Take the ranked chunks' (text, refs, context type, node version) rows, best first:
        `sources` as `explode` reads a candidate row."""
        for text, refs, ctype, version in rows:
            self.sources.append((str(text), tuple(str(r) for r in refs or ()), str(ctype)))
            self.versions.append(int(version or 0))


# the text arm with its ranking statement on the wire: `result()` reads it
PendingTextArm = Pending[TextArm]


class TextArmStore:
    """The text arm's statements and the scope statistics (row counts, term document
    frequencies, the scope's own stopwords), cached per scope."""

    def __init__(self, db: Database, schema: str, config: FindConfig) -> None:
        self.db = db
        self.schema = schema
        self.config = config
        self.queries = Queries(schema)
        # owner row counts for the plan choice: briefly stale is harmless, a count is a scan
        self._stats: LockedCache[tuple[int, float]] = LockedCache.ttl(1024, config.count_cache_s)
        # term document frequencies for the IDFs: they move slowly, one query per new term
        self._df: LockedCache[int] = LockedCache.ttl(50_000, max(config.count_cache_s, 60.0))
        self.common = CommonLexemes(db, self.queries, config.common_word_ratio)

    @staticmethod
    def _scope_key(filters: FindFilters) -> tuple[Any, ...]:
        return (filters.account_id, tuple(filters.owner_spaces or ()), filters.owner_spaces is None)

    def term_df(
        self, filters: FindFilters, terms: Sequence[str], plan: str = "hnsw"
    ) -> dict[str, int]:
        """Document frequency of each term in the account/owner scope (cached)."""
        key = self._scope_key(filters)
        out: dict[str, int] = {}
        missing: list[str] = []
        for t in terms:
            cached = self._df.get((key, t))
            if cached is None:
                missing.append(t)
            else:
                out[t] = int(cached)
        if missing:
            where, params = build_where(filters, scope_only=True)
            params.update(terms=missing, sample=self.config.df_sample_rows)
            n_rows = self.scope_stats(filters)[0]
            with self.db.autocommit() as conn:
                name = "retrieval_term_df" if plan == "hnsw" else "retrieval_term_df_scan"
                rows = conn.execute(
                    sql.SQL(self.queries[name]).format(where=where), params
                ).fetchall()
            found: dict[str, int] = {}
            for term, df, seen in rows:
                if int(df) and int(seen) < n_rows:  # a sample: scale to the scope
                    df = max(1, round(int(df) * n_rows / max(int(seen), 1)))
                found[str(term)] = int(df)
            for t in missing:
                out[t] = found.get(t, 0)  # 0: a stopword, or absent from the scope
                self._df.put((key, t), out[t])
        return out

    def common_lexemes(self, filters: FindFilters) -> frozenset[str]:
        """The scope's own stopwords (`common_words.CommonLexemes`)."""
        return self.common.of(
            self._scope_key(filters), lambda: build_where(filters, scope_only=True)
        )

    def common_terms(self, filters: FindFilters, terms: Sequence[str]) -> set[str]:
        """The query terms that are the scope's own stopwords (`common_lexemes`): neither
        arm searches with them, unless every term is one."""
        if not terms or self.config.common_word_ratio <= 0:
            return set()
        return common_words(terms, self.common_lexemes(filters))

    def text_plan(
        self, filters: FindFilters, terms: Sequence[str], n_rows: int
    ) -> tuple[dict[str, float], list[str]]:
        """(IDF of every term present in the scope, the selective terms to match on)."""
        plan = self.plan_for(n_rows)
        df = self.term_df(filters, terms, plan)
        present = [t for t in terms if df.get(t, 0) > 0]
        idf = {t: bm25_idf(df[t], n_rows) for t in present}
        if plan == "exact":  # a small scope: every term is cheap to match on
            return idf, present
        cap = max(self.config.text_min_df_cap, self.config.text_max_df_ratio * n_rows)
        selective = [t for t in present if df[t] <= cap]
        if not selective:
            selective = sorted(present, key=lambda t: df[t])[:2]
        return idf, selective

    def scope_stats(self, filters: FindFilters) -> tuple[int, float]:
        """(rows in the account/owner scope, mean lexemes per chunk), cached briefly."""
        key = self._scope_key(filters)
        cached = self._stats.get(key)
        if cached is not None:
            return cached
        where, params = build_where(filters, scope_only=True)
        with self.db.autocommit() as conn:
            row = conn.execute(
                sql.SQL(self.queries["retrieval_scope_stats"]).format(where=where), params
            ).fetchone()
        n = int(row[0]) if row and row[0] else 0
        avgdl = float(row[1]) if row and row[1] else 1.0
        self._stats.put(key, (n, avgdl))
        return n, avgdl

    def _tsv(self, plan: str) -> sql.Composable:
        """The tsv column for the GIN index (large scopes), or an expression the index cannot
        serve so that a small owner's rows are filtered instead (a GIN lookup of a common
        term reads its matches in every owner)."""
        return sql.SQL("c.tsv") if plan == "hnsw" else sql.SQL("(c.tsv || ''::tsvector)")

    def plan_for(self, n_rows: int) -> str:
        return "exact" if n_rows <= self.config.exact_scan_max_rows else "hnsw"

    def text_arm(
        self,
        query: str,
        filters: FindFilters,
        n_cand: int,
        *,
        plan: str | None = None,
        timings: dict[str, float] | None = None,
        common: Collection[str] = (),
    ) -> TextArm:
        """Scope statistics, the plan, term IDFs, and the full-text ranking, without the
        `common` terms (`send_text_arm`, read at once)."""
        with self.send_text_arm(
            query, filters, n_cand, plan=plan, timings=timings, common=common
        ) as pending:
            return pending.result()

    def send_text_arm(
        self,
        query: str,
        filters: FindFilters,
        n_cand: int,
        *,
        plan: str | None = None,
        timings: dict[str, float] | None = None,
        common: Collection[str] = (),
    ) -> PendingTextArm:
        """The text arm with its ranking statement sent, not yet read: PostgreSQL runs it while
        the caller goes on. Statistics not cached are read first (a small scope's come with
        its ranking, in one statement)."""
        cfg = self.config
        timings = timings if timings is not None else {}
        terms = query_terms(query, cfg.max_query_terms) if cfg.text_weight > 0 else []
        terms = [t for t in terms if t not in common]
        if terms and plan in (None, "exact") and self._cold(filters, terms):
            return self._send_cold(filters, terms, n_cand, plan, timings)
        return self._send_warm(filters, terms, n_cand, plan, timings)

    def _send_warm(
        self,
        filters: FindFilters,
        terms: list[str],
        n_cand: int,
        plan: str | None,
        timings: dict[str, float],
    ) -> PendingTextArm:
        cfg = self.config
        t0 = time.perf_counter()
        n_rows, avgdl = self.scope_stats(filters)
        chosen = plan or self.plan_for(n_rows)
        idf, selective = self.text_plan(filters, terms, n_rows) if terms else ({}, [])
        timings["scope"] = (time.perf_counter() - t0) * 1000
        arm = TextArm(plan=chosen, scope_rows=n_rows, idf=idf, text_terms=selective)
        if not selective:
            return PendingTextArm(lambda: arm)
        t1 = time.perf_counter()
        where, params = build_where(filters)
        params.update(
            terms=list(idf),
            idfs=[idf[t] for t in idf],
            tsq=tsquery_or(selective),
            text_rows=cfg.text_max_rows,
            avgdl=float(max(avgdl, 1.0)),
            k1=_BM25_K1,
            b=_BM25_B,
            n_txt=n_cand,
        )
        query_sql = sql.SQL(self.queries["retrieval_text_arm"]).format(
            where=where, tsv=self._tsv(chosen)
        )
        sent = self._send(query_sql, params)

        def finish() -> TextArm:
            ranked = sent.rows()
            arm.ids = [str(row[0]) for row in ranked]
            arm.scores = [float(row[1]) for row in ranked]
            arm.read(row[2:] for row in ranked)
            timings["sql_text"] = (time.perf_counter() - t1) * 1000
            return arm

        return PendingTextArm(finish, sent)

    def _send(self, query_sql: sql.Composed, params: dict[str, Any]) -> SentStatement[Any]:
        what = f"find's text arm on {self.schema}.context_chunks"
        return SentStatement(self.db, query_sql, params, tuple_row, what)

    def _cold(self, filters: FindFilters, terms: Sequence[str]) -> bool:
        """Are the scope's statistics, or a term's document frequency, not cached — and is
        the scope not known to be large?"""
        key = self._scope_key(filters)
        stats = self._stats.get(key)
        if stats is not None and self.plan_for(stats[0]) != "exact":
            return False
        return stats is None or any(self._df.get((key, t)) is None for t in terms)

    def _send_cold(
        self,
        filters: FindFilters,
        terms: list[str],
        n_cand: int,
        plan: str | None,
        timings: dict[str, float],
    ) -> PendingTextArm:
        """The text arm of a small scope not seen lately, in one statement that also counts
        the scope and its terms (`retrieval_text_arm_cold`); the counts are cached as
        `scope_stats` and `term_df` cache theirs. A scope that turns out large (its
        statistics now cached) takes the large-scope path when the arm is read, with the
        `plan` asked for, if any (the cold statement's time counted as the scope's)."""
        cfg = self.config
        t0 = time.perf_counter()
        scope, params = build_where(filters, scope_only=True)
        where, full = build_where(filters)
        params.update(full)
        params.update(
            terms=list(terms),
            max_rows=cfg.exact_scan_max_rows,
            text_rows=cfg.text_max_rows,
            k1=_BM25_K1,
            b=_BM25_B,
            n_txt=n_cand,
        )
        query_sql = sql.SQL(self.queries["retrieval_text_arm_cold"]).format(
            scope=scope, where=where
        )
        sent = self._send(query_sql, params)

        def finish() -> TextArm:
            n_rows, avgdl, seen, dfs, ids, scores, sources = sent.rows()[0]
            key = self._scope_key(filters)
            n_rows, avgdl = int(n_rows), float(avgdl)
            self._stats.put(key, (n_rows, avgdl))
            if self.plan_for(n_rows) != "exact":  # the plan asked for, if any, is kept
                cold_ms = (time.perf_counter() - t0) * 1000
                with self._send_warm(filters, terms, n_cand, plan, timings) as large:
                    arm = large.result()
                timings["scope"] = timings.get("scope", 0.0) + cold_ms
                return arm
            df = dict(zip(seen or [], dfs or [], strict=True))
            for t in terms:
                self._df.put((key, t), int(df.get(t, 0)))
            idf = {t: bm25_idf(int(df[t]), n_rows) for t in terms if int(df.get(t, 0)) > 0}
            timings["scope"] = 0.0
            timings["sql_text"] = (time.perf_counter() - t0) * 1000
            arm = TextArm(
                plan="exact",
                scope_rows=n_rows,
                idf=idf,
                text_terms=list(idf),
                ids=[str(i) for i in ids or []],
                scores=[float(x) for x in scores or []],
            )
            arm.read(sources or [])
            return arm

        return PendingTextArm(finish, sent)

    def invalidate(self) -> None:
        self._stats.clear()
        self._df.clear()
        self.common.clear()


__all__ = ["ChunkSource", "PendingTextArm", "TextArm", "TextArmStore", "build_where"]
