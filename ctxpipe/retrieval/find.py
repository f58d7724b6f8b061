"""Hybrid `find`: pgvector cosine fused with PostgreSQL full-text rank (reciprocal rank fusion).

One SQL round trip per query (`sql/queries/retrieval.sql` ``retrieval_hybrid``):

- vector arm: the best chunks by cosine distance. Plan choice by the number of rows the filter
  leaves (counted on the ``(account_id, owner_space)`` index, cached briefly): up to
  ``exact_scan_max_rows`` the owner's rows are scanned exactly (the ORDER BY expression cannot
  use the HNSW index); above it HNSW with ``hnsw.iterative_scan`` so filtered scans still fill
  their LIMIT. An HNSW scan with a 1 % owner filter loses most neighbours; an exact scan of a
  few thousand rows takes about a millisecond.
- full-text arm: BM25-style ranking — the IDF of every query term within the same scope,
  binary term frequency and length normalisation — over the ``tsv`` column (GIN index).
- fusion: ``score = wv/(k + rank_vec) + wt/(k + rank_text)``.

Each fused chunk becomes a hit that returns only the part that matched: the chunk's lines
(archive turns, memory lines) ranked by the query — term overlap weighted by IDF plus cosine of
the line — up to ``snippet_tokens``, citing exactly the message ids of those lines. Hits are
grouped by context type; every returned node gets a recall recorded.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ctxpipe.core.errors import StorageError
from ctxpipe.providers.base import Embedder
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.models import FindFilters, FindHit, FindResult
from ctxpipe.retrieval.recall_stats import RecallStatsStore
from ctxpipe.retrieval.text import Unit, lexical_score, query_terms, split_units, tsquery_or
from ctxpipe.retrieval.tokens import TokenCounter
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

log = logging.getLogger(__name__)

_BM25_K1 = 1.2
_BM25_B = 0.75
_LEXICAL_WEIGHT = 0.5  # snippet line score = cosine + 0.5 * (matched IDF share)


def _vector_literal(vector: Sequence[float]) -> str:
    values = [float(x) for x in vector]
    if not values or not all(math.isfinite(x) for x in values):
        raise ValueError("query vector is empty or not finite")
    return "[" + ",".join(repr(x) for x in values) + "]"


def _like_prefix(prefix: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", prefix) + "%"


def build_where(filters: FindFilters, *, scope_only: bool = False) -> tuple[sql.Composed, dict]:
    """WHERE clause over ``c`` (context_chunks) and its parameters.

    `scope_only`: just account + owner spaces (what the plan-choice count uses)."""
    params: dict[str, Any] = {"account": filters.account_id}
    where: list[sql.Composable] = [sql.SQL("c.account_id = %(account)s")]
    if filters.owner_spaces is not None:
        exact = [s for s in filters.owner_spaces if "/" in s]
        scopes = [s for s in filters.owner_spaces if "/" not in s]
        parts: list[sql.Composable] = []
        if exact:
            params["spaces"] = exact
            parts.append(sql.SQL("c.owner_space = ANY(%(spaces)s)"))
        if scopes:
            params["space_scopes"] = scopes
            params["space_like"] = [s + "/%" for s in scopes]
            parts.append(sql.SQL("c.owner_space = ANY(%(space_scopes)s)"))
            parts.append(sql.SQL("c.owner_space LIKE ANY(%(space_like)s)"))
        if not parts:
            where.append(sql.SQL("false"))
        else:
            where.append(sql.SQL("(") + sql.SQL(" OR ").join(parts) + sql.SQL(")"))
    if not scope_only:
        for field, column in (
            ("context_types", "context_type"),
            ("categories", "category"),
            ("parent_uris", "parent_uri"),
            ("uris", "uri"),
        ):
            values = getattr(filters, field)
            if values is None:
                continue
            params[field] = list(values)
            where.append(
                sql.SQL("c.{} = ANY(%({})s)").format(sql.Identifier(column), sql.SQL(field))
            )
        if filters.levels is not None:
            params["levels"] = list(filters.levels)
            where.append(sql.SQL("c.level = ANY(%(levels)s)"))
        if filters.uri_prefixes is not None:
            params["uri_like"] = [_like_prefix(p) for p in filters.uri_prefixes]
            where.append(sql.SQL("c.uri LIKE ANY(%(uri_like)s)"))
    return sql.SQL(" AND ").join(where), params


class _TTLCache:
    def __init__(self, ttl_s: float, size: int = 1024) -> None:
        self.ttl_s = ttl_s
        self.size = size
        self._data: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            item = self._data.get(key)
            if item is None or time.monotonic() - item[0] > self.ttl_s:
                return None
            return item[1]

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._data[key] = (time.monotonic(), value)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class UnitVectors:
    """LRU cache of line embeddings (lines of archives/memories recur across queries)."""

    def __init__(self, embedder: Embedder, size: int = 50000) -> None:
        self.embedder = embedder
        self.size = size
        self._data: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, texts: Sequence[str]) -> np.ndarray:
        out: dict[str, np.ndarray] = {}
        missing: list[str] = []
        with self._lock:
            for t in texts:
                v = self._data.get(t)
                if v is None:
                    missing.append(t)
                else:
                    self._data.move_to_end(t)
                    out[t] = v
        if missing:
            uniq = list(dict.fromkeys(missing))
            vecs = np.asarray(self.embedder.encode(uniq), dtype=np.float32)
            with self._lock:
                for t, v in zip(uniq, vecs, strict=True):
                    self._data[t] = v
                    out[t] = v
                while len(self._data) > self.size:
                    self._data.popitem(last=False)
        return np.stack([out[t] for t in texts]) if texts else np.zeros((0, 1), np.float32)


class HybridFinder:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        counter: TokenCounter,
        *,
        schema: str = "ctx",
        config: FindConfig | None = None,
        recall_stats: RecallStatsStore | None = None,
        semantic_snippets: bool = True,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.counter = counter
        self.config = config or FindConfig()
        self.queries = Queries(schema)
        self.schema = schema
        self.recall_stats = recall_stats
        self.semantic_snippets = semantic_snippets
        self._stats = _TTLCache(self.config.count_cache_s)
        self._units = UnitVectors(embedder)
        self._iterative: bool | None = None

    # ------------------------------------------------------------------ public API
    def embed(self, query: str) -> list[float]:
        return list(self.embedder.encode([query])[0])

    def find(
        self,
        query: str,
        filters: FindFilters,
        top_k: int | None = None,
        *,
        query_vector: Sequence[float] | None = None,
        record: bool | None = None,
    ) -> FindResult:
        cfg = self.config
        k = top_k or cfg.top_k
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        qvec = list(query_vector) if query_vector is not None else self.embed(query)
        timings["embed"] = (time.perf_counter() - t0) * 1000
        rows, plan, n_rows = self.candidates(query, qvec, filters, k, timings=timings)
        t1 = time.perf_counter()
        hits = self._hits(query, qvec, rows, filters, k)
        timings["snippets"] = (time.perf_counter() - t1) * 1000
        if hits and (cfg.record_recalls if record is None else record) and self.recall_stats:
            t2 = time.perf_counter()
            self.recall_stats.record_hits(filters.account_id, hits)
            timings["record"] = (time.perf_counter() - t2) * 1000
        timings["total"] = (time.perf_counter() - t0) * 1000
        return FindResult.from_hits(query, hits, plan=plan, owner_rows=n_rows, timings_ms=timings)

    async def afind(self, query: str, filters: FindFilters, top_k: int | None = None) -> FindResult:
        return await asyncio.to_thread(self.find, query, filters, top_k)

    def candidates(
        self,
        query: str,
        qvec: Sequence[float],
        filters: FindFilters,
        top_k: int,
        *,
        timings: dict[str, float] | None = None,
        plan: str | None = None,
    ) -> tuple[list[dict[str, Any]], str, int]:
        """Fused candidate chunks (dict rows, best first), the plan used, the scope's rows."""
        cfg = self.config
        timings = timings if timings is not None else {}
        t0 = time.perf_counter()
        n_rows, avgdl = self.scope_stats(filters)
        timings["scope"] = (time.perf_counter() - t0) * 1000
        chosen = plan or ("exact" if n_rows <= cfg.exact_scan_max_rows else "hnsw")
        terms = query_terms(query, cfg.max_query_terms)
        n_cand = max(cfg.candidates, top_k * 2)
        where, params = build_where(filters)
        q = _vector_literal(qvec)
        order = (
            sql.SQL("(c.embedding <=> %(q)s::vector) + 0")
            if chosen == "exact"
            else sql.SQL("c.embedding <=> %(q)s::vector")
        )
        params.update(
            q=q,
            n_vec=n_cand,
            n_txt=n_cand,
            k=float(cfg.rrf_k),
            wv=float(cfg.vector_weight),
            wt=float(cfg.text_weight),
        )
        if terms and cfg.text_weight > 0:
            name = "retrieval_hybrid"
            params.update(
                terms=terms,
                tsq=tsquery_or(terms),
                n_rows=float(max(n_rows, 1)),
                avgdl=float(max(avgdl, 1.0)),
                k1=_BM25_K1,
                b=_BM25_B,
            )
        else:
            name = "retrieval_vector"
        query_sql = sql.SQL(self.queries[name]).format(where=where, vec_order=order)
        t1 = time.perf_counter()
        try:
            with self.db.connection() as conn:
                if chosen == "hnsw":
                    self._tune(conn, n_cand)
                cur = conn.execute(query_sql, params)
                names = [d.name for d in cur.description or []]
                rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        except psycopg.Error as exc:
            raise StorageError(f"find on {self.schema}.context_chunks failed: {exc}") from exc
        timings["sql"] = (time.perf_counter() - t1) * 1000
        return rows, chosen, n_rows

    def scope_stats(self, filters: FindFilters) -> tuple[int, float]:
        """(rows in the account/owner scope, mean lexemes per chunk), cached briefly."""
        key = (filters.account_id, tuple(filters.owner_spaces or ()), filters.owner_spaces is None)
        cached = self._stats.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        where, params = build_where(filters, scope_only=True)
        with self.db.connection() as conn:
            row = conn.execute(
                sql.SQL(self.queries["retrieval_scope_rows"]).format(where=where), params
            ).fetchone()
            n = int(row[0]) if row else 0
            row = conn.execute(
                sql.SQL(self.queries["retrieval_scope_avgdl"]).format(where=where), params
            ).fetchone()
            avgdl = float(row[0]) if row and row[0] else 1.0
        self._stats.put(key, (n, avgdl))
        return n, avgdl

    def exact_neighbours(
        self, qvec: Sequence[float], filters: FindFilters, n: int
    ) -> list[tuple[str, float]]:
        """Ground truth: exact cosine top-n chunk ids (tests and benchmarks)."""
        where, params = build_where(filters)
        params.update(q=_vector_literal(qvec), n=n)
        query_sql = sql.SQL(self.queries["retrieval_exact_neighbours"]).format(where=where)
        with self.db.connection() as conn:
            return [(r[0], float(r[1])) for r in conn.execute(query_sql, params).fetchall()]

    def invalidate(self) -> None:
        """Forget cached scope statistics (after bulk loads)."""
        self._stats.clear()

    # ------------------------------------------------------------------ internals
    def _tune(self, conn: psycopg.Connection[Any], limit: int) -> None:
        cfg = self.config
        if self._iterative is None:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            version = tuple(int(p) for p in str(row[0] if row else "0").split(".") if p.isdigit())
            self._iterative = version >= (0, 8)
        if self._iterative:
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
                "set_config('hnsw.max_scan_tuples', %s, true)",
                (str(max(cfg.ef_search, limit)), str(cfg.max_scan_tuples)),
            )
        else:
            conn.execute(
                "SELECT set_config('hnsw.ef_search', %s, true)", (str(max(cfg.ef_search, limit)),)
            )

    def _hits(
        self,
        query: str,
        qvec: Sequence[float],
        rows: list[dict[str, Any]],
        filters: FindFilters,
        top_k: int,
    ) -> list[FindHit]:
        cfg = self.config
        q = np.asarray(qvec, dtype=np.float32)
        hits: list[FindHit] = []
        per_uri: dict[str, set[str]] = {}
        seen_text: set[str] = set()
        for row in rows:
            if len(hits) >= top_k:
                break
            sim = float(row["sim"]) if row["sim"] is not None else 0.0
            if sim < filters.min_score:
                continue
            uri = row["uri"]
            cited_before = per_uri.get(uri)
            if cited_before is not None and len(per_uri_hits(hits, uri)) >= cfg.max_hits_per_uri:
                continue
            text, refs = self._snippet(row, q, row.get("idf") or {})
            if not text:
                continue
            norm = " ".join(text.lower().split())
            if norm in seen_text:
                continue
            if cited_before is not None and set(refs) <= cited_before:
                continue  # a second hit of one node must cite something new
            seen_text.add(norm)
            per_uri.setdefault(uri, set()).update(refs)
            abstract = self._abstract(row)
            hit = FindHit(
                uri=uri,
                level=int(row["level"]),
                chunk_index=int(row["chunk_index"]),
                chunk_id=row["chunk_id"],
                context_type=row["context_type"] or "memory",
                category=row["category"] or "",
                owner_space=row["owner_space"] or "",
                parent_uri=row["parent_uri"] or "",
                score=float(row["rrf"]),
                similarity=sim,
                text_rank=float(row["bm25"] or 0.0),
                vector_rank=row["vr"],
                fts_rank=row["tr"],
                abstract=abstract,
                text=text,
                source_refs=refs,
                node_version=int(row["node_version"] or 0),
                chunk_text=row["text_content"] or "",
            )
            hit.tokens = self.counter.count(hit.returned_text())
            hits.append(hit)
        return hits

    def _abstract(self, row: dict[str, Any]) -> str:
        text = (row.get("abstract_text") or "").strip()
        if int(row["level"]) == 0 and text and text == (row["text_content"] or "").strip():
            pass
        line = text.splitlines()[0] if text else ""
        return self.counter.truncate(line, self.config.abstract_tokens)

    def _snippet(
        self, row: dict[str, Any], q: np.ndarray, idf: dict[str, float]
    ) -> tuple[str, list[str]]:
        """The lines of the chunk that answer the query, and the message ids they cite."""
        cap = self.config.snippet_tokens
        refs = [str(r) for r in (row["source_refs"] or [])]
        derived = (row["context_type"] or "memory") != "session"
        units = [u for u in split_units(row["text_content"] or "", refs, derived=derived) if u.text]
        if not units:
            return "", []
        if len(units) == 1:
            chosen = units
        else:
            chosen = self._best_units(units, q, idf, cap)
        text = "\n".join(u.text for u in chosen)
        if self.counter.count(text) > cap:
            text = self.counter.truncate(text, cap)
        cited: list[str] = []
        for u in chosen:
            for r in u.refs:
                if r not in cited:
                    cited.append(r)
        return text, cited

    def _best_units(
        self, units: list[Unit], q: np.ndarray, idf: dict[str, float], cap: int
    ) -> list[Unit]:
        total_idf = sum(idf.values()) or 1.0
        scores = np.array([lexical_score(u.text, idf) / total_idf for u in units], np.float32)
        scores *= _LEXICAL_WEIGHT
        if self.semantic_snippets:
            vecs = self._units.get_many([u.text for u in units])
            scores += vecs @ q
        order = sorted(range(len(units)), key=lambda i: -scores[i])
        chosen: list[int] = []
        used = 0
        for i in order:
            n = self.counter.count(units[i].text)
            if chosen and used + n > cap:
                continue
            chosen.append(i)
            used += n
            if used >= cap:
                break
            if len(chosen) >= 1 and scores[i] < scores[order[0]] * 0.9:
                break
        return [units[i] for i in sorted(chosen)]


def per_uri_hits(hits: list[FindHit], uri: str) -> list[FindHit]:
    return [h for h in hits if h.uri == uri]


__all__ = ["HybridFinder", "UnitVectors", "build_where"]
