"""The SQL side of `find`: filter composition, the plan choice, and the candidate queries.

Two statements per query (`sql/queries/retrieval.sql`): ``retrieval_text_arm`` (needs no query
vector, so it runs while the query is embedded) and ``retrieval_fused`` (the vector arm, the
fusion and the candidates' rows); scope statistics and term frequencies are cached, and a small
scope not seen lately gets them with its text arm in one statement (``retrieval_text_arm_cold``).
A read statement runs in autocommit (one round trip); the HNSW plan runs in a transaction for
its transaction-local settings.

- vector arm: the best chunks by cosine distance. The plan is chosen by the number of rows the
  account/owner filter leaves (counted on the ``(account_id, owner_space)`` index, cached
  briefly): up to ``exact_scan_max_rows`` those rows are scanned exactly (the ORDER BY
  expression cannot use the HNSW index); above it the HNSW index with
  ``hnsw.iterative_scan`` so a filtered scan still fills its LIMIT. An HNSW scan with a 1 %
  owner filter loses most neighbours, while an exact scan of a few thousand rows takes about a
  millisecond.
- full-text arm: BM25-style — the IDF of each query term within the same scope (document
  frequencies counted once per term and scope — exactly in a small scope, on a sample of
  ``df_sample_rows`` rows in a large one — then cached briefly), binary term frequency,
  length normalisation — over the ``tsv`` column. In a large scope it reads only the chunks
  that contain a selective term (document frequency at most ``text_max_df_ratio`` of the
  scope; the two rarest terms when none is), at most ``text_max_rows`` of them, so a common
  word never makes it rank a large part of the account.
- fusion: ``rrf = wv/(k + rank_vector) + wt/(k + rank_text)``.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import RowFactory, class_row, tuple_row

from ctxpipe.core.caches import LockedCache
from ctxpipe.core.errors import StorageError
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.common_words import CommonLexemes, common_words
from ctxpipe.retrieval.models import CandidateRow, FindFilters
from ctxpipe.retrieval.units.lexical import bm25_idf, query_terms, tsquery_or
from ctxpipe.storage.chunk_sql import (
    ChunkScope,
    HnswTuner,
    chunk_where,
    fetch_with_vectors,
    vector_param,
)
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

R = TypeVar("R")

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


@dataclass
class TextArm:
    plan: str
    scope_rows: int
    idf: dict[str, float] = field(default_factory=dict)
    text_terms: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # best first
    scores: list[float] = field(default_factory=list)


@dataclass
class Candidates:
    rows: list[CandidateRow]
    plan: str
    scope_rows: int
    idf: dict[str, float] = field(default_factory=dict)  # query term -> IDF in the scope
    text_terms: list[str] = field(default_factory=list)  # the terms the text arm matched on


class CandidateStore:
    """Runs the candidate query (and the plan-choice statistics) on the index replica."""

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
        self._tuner = HnswTuner(self.queries)

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
        """Scope statistics, the plan, term IDFs, and the full-text ranking (no query vector
        needed: it runs while the query is being embedded), without the `common` terms."""
        cfg = self.config
        timings = timings if timings is not None else {}
        t0 = time.perf_counter()
        terms = query_terms(query, cfg.max_query_terms) if cfg.text_weight > 0 else []
        terms = [t for t in terms if t not in common]
        if terms and plan in (None, "exact") and self._cold(filters, terms):
            cold = self._cold_text_arm(filters, terms, n_cand, timings)
            if cold is not None:
                return cold
        n_rows, avgdl = self.scope_stats(filters)
        chosen = plan or self.plan_for(n_rows)
        idf, selective = self.text_plan(filters, terms, n_rows) if terms else ({}, [])
        timings["scope"] = (time.perf_counter() - t0) * 1000
        arm = TextArm(plan=chosen, scope_rows=n_rows, idf=idf, text_terms=selective)
        if not selective:
            return arm
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
        ranked = self._fetch(query_sql, params, None, 0, tuple_row)
        arm.ids = [str(chunk_id) for chunk_id, _ in ranked]
        arm.scores = [float(score) for _, score in ranked]
        timings["sql_text"] = (time.perf_counter() - t1) * 1000
        return arm

    def _cold(self, filters: FindFilters, terms: Sequence[str]) -> bool:
        """Are the scope's statistics, or a term's document frequency, not cached — and is
        the scope not known to be large?"""
        key = self._scope_key(filters)
        stats = self._stats.get(key)
        if stats is not None and self.plan_for(stats[0]) != "exact":
            return False
        return stats is None or any(self._df.get((key, t)) is None for t in terms)

    def _cold_text_arm(
        self,
        filters: FindFilters,
        terms: Sequence[str],
        n_cand: int,
        timings: dict[str, float],
    ) -> TextArm | None:
        """The text arm of a small scope not seen lately, in one statement that also counts
        the scope and its terms (`retrieval_text_arm_cold`); the counts are cached as
        `scope_stats` and `term_df` cache theirs. None when the scope is large (its statistics
        cached, the caller takes the large-scope path)."""
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
        found = self._fetch(query_sql, params, None, 0, tuple_row)
        n_rows, avgdl, seen, dfs, ids, scores = found[0]
        key = self._scope_key(filters)
        n_rows, avgdl = int(n_rows), float(avgdl)
        self._stats.put(key, (n_rows, avgdl))
        if self.plan_for(n_rows) != "exact":
            return None
        df = dict(zip(seen or [], dfs or [], strict=True))
        for t in terms:
            self._df.put((key, t), int(df.get(t, 0)))
        idf = {t: bm25_idf(int(df[t]), n_rows) for t in terms if int(df.get(t, 0)) > 0}
        timings["scope"] = 0.0
        timings["sql_text"] = (time.perf_counter() - t0) * 1000
        return TextArm(
            plan="exact",
            scope_rows=n_rows,
            idf=idf,
            text_terms=list(idf),
            ids=[str(i) for i in ids or []],
            scores=[float(x) for x in scores or []],
        )

    def fuse(
        self,
        qvec: Sequence[float],
        filters: FindFilters,
        arm: TextArm,
        n_cand: int,
        *,
        chunk_vectors: bool = True,
        timings: dict[str, float] | None = None,
    ) -> Candidates:
        """The vector arm fused with the text arm: candidate rows, best first; each with its
        chunk's vector unless `chunk_vectors` is False (`CandidateRow.embedding` None), and
        then still a chunk with no stored unit vectors."""
        cfg = self.config
        timings = timings if timings is not None else {}
        t0 = time.perf_counter()
        where, params = build_where(filters)
        order = (
            sql.SQL("(c.embedding <=> %(q)s::vector) + 0")
            if arm.plan == "exact"
            else sql.SQL("c.embedding <=> %(q)s::vector")
        )
        params.update(
            q=vector_param(qvec),
            n_vec=n_cand,
            txt_ids=arm.ids,
            txt_scores=arm.scores,
            k=float(cfg.rrf_k),
            wv=float(cfg.vector_weight),
            wt=float(cfg.text_weight),
            chunk_vectors=chunk_vectors,
        )
        query_sql = sql.SQL(self.queries["retrieval_fused"]).format(where=where, vec_order=order)
        rows = self._fetch(query_sql, params, arm.plan, n_cand, class_row(CandidateRow))
        timings["sql_vector"] = (time.perf_counter() - t0) * 1000
        return Candidates(rows, arm.plan, arm.scope_rows, arm.idf, arm.text_terms)

    def candidates(
        self,
        query: str,
        qvec: Sequence[float],
        filters: FindFilters,
        n_cand: int,
        *,
        plan: str | None = None,
        timings: dict[str, float] | None = None,
    ) -> Candidates:
        """Both arms, one after the other (`HybridFinder.find` overlaps the text arm with the
        query embedding)."""
        arm = self.text_arm(query, filters, n_cand, plan=plan, timings=timings)
        return self.fuse(qvec, filters, arm, n_cand, timings=timings)

    def _fetch(
        self,
        query_sql: sql.Composed,
        params: dict[str, Any],
        hnsw_plan: str | None,
        limit: int,
        rows: RowFactory[R],
    ) -> list[R]:
        # one statement: autocommit saves BEGIN and COMMIT (two round trips); the HNSW plan's
        # settings are transaction-local, so that plan runs in a transaction
        hnsw = hnsw_plan == "hnsw"
        try:
            with self.db.connection() if hnsw else self.db.autocommit() as conn:
                if hnsw:
                    self._tune(conn, limit)
                with conn.cursor(row_factory=rows, binary=True) as cur:  # vectors: no parsing
                    cur.execute(query_sql, params)
                    return cur.fetchall()
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split())
            raise StorageError(f"find on {self.schema}.context_chunks failed: {detail}") from exc

    def unit_vectors(self, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored vectors of the units of these chunks: chunk id -> unit key -> vector
        (one query; a chunk without units maps to an empty dict)."""
        if not chunk_ids:
            return {}
        out: dict[str, dict[str, Any]] = {str(c): {} for c in chunk_ids}
        with self.db.autocommit() as conn:  # hundreds of vectors, decoded together
            rows = fetch_with_vectors(
                conn, self.queries["retrieval_unit_vectors"], {"ids": list(chunk_ids)}
            )
        for (chunk_id, key), vec in rows:
            out.setdefault(str(chunk_id), {})[str(key)] = vec
        return out

    def edges_among(
        self, account_id: str, seeds: Sequence[str], uris: Sequence[str]
    ) -> list[tuple[str, str]]:
        """Relation edges, either direction, between `seeds` and `uris` (one query)."""
        if not seeds or not uris:
            return []
        with self.db.autocommit() as conn:
            rows = conn.execute(
                self.queries["retrieval_edges_among"],
                {"account": account_id, "seeds": list(seeds), "uris": list(uris)},
            ).fetchall()
        return [(str(a), str(b)) for a, b in rows]

    def exact_neighbours(
        self, qvec: Sequence[float], filters: FindFilters, n: int
    ) -> list[tuple[str, float]]:
        """Ground truth: exact cosine top-n chunk ids (tests and benchmarks)."""
        where, params = build_where(filters)
        params.update(q=vector_param(qvec), n=n)
        query_sql = sql.SQL(self.queries["retrieval_exact_neighbours"]).format(where=where)
        with self.db.autocommit() as conn:
            return [(r[0], float(r[1])) for r in conn.execute(query_sql, params).fetchall()]

    def invalidate(self) -> None:
        self._stats.clear()
        self._df.clear()
        self.common.clear()

    def _tune(self, conn: psycopg.Connection[Any], limit: int) -> None:
        """Transaction-local HNSW settings: candidate list size and iterative scans."""
        cfg = self.config
        ef = max(cfg.ef_search, limit)
        self._tuner.tune(conn, ef, order="relaxed_order", max_scan_tuples=cfg.max_scan_tuples)


__all__ = [
    "CandidateStore",
    "Candidates",
    "TextArm",
    "build_where",
]
