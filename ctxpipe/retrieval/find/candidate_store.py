"""The SQL side of `find`: the vector arm fused with the full-text arm, and the candidates'
rows (`sql/queries/retrieval.sql`).

Two statements per query: ``retrieval_text_arm`` (`TextArmStore`: it needs no query vector,
so it is sent before the query is embedded and PostgreSQL runs it meanwhile) and
``retrieval_fused`` (the vector arm, the fusion and the candidates' rows). A read statement
runs in autocommit (one round trip); the HNSW plan runs in a transaction for its
transaction-local settings.

- vector arm: the best chunks by cosine distance. The plan is chosen by the number of rows the
  account/owner filter leaves (counted on the ``(account_id, owner_space)`` index, cached
  briefly): up to ``exact_scan_max_rows`` those rows are scanned exactly (the ORDER BY
  expression cannot use the HNSW index); above it the HNSW index with
  ``hnsw.iterative_scan`` so a filtered scan still fills its LIMIT. An HNSW scan with a 1 %
  owner filter loses most neighbours, while an exact scan of a few thousand rows takes about a
  millisecond.
- full-text arm: BM25-style over the ``tsv`` column (`text_arm`).
- fusion: ``rrf = wv/(k + rank_vector) + wt/(k + rank_text)``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import RowFactory, class_row, tuple_row

from ctxpipe.core.errors import StorageError
from ctxpipe.retrieval.config import FindConfig
from ctxpipe.retrieval.find.text_arm import TextArm, TextArmStore, build_where
from ctxpipe.retrieval.models import CandidateRow, FindFilters
from ctxpipe.storage.chunk_sql import (
    HnswTuner,
    fetch_with_vectors,
    raw_vectors,
    split_vectors,
    vector_param,
)
from ctxpipe.storage.db import Database
from ctxpipe.storage.pipelined import NoIdleConnection, Pending, SentStatement

R = TypeVar("R")


@dataclass
class Candidates:
    rows: list[CandidateRow]
    plan: str
    scope_rows: int
    idf: dict[str, float] = field(default_factory=dict)  # query term -> IDF in the scope
    text_terms: list[str] = field(default_factory=list)  # the terms the text arm matched on


# the fused statement on the wire (`CandidateStore.send_fuse`): `result()` reads it
PendingCandidates = Pending[Candidates]
UnitRows = dict[str, dict[str, Any]]  # chunk id -> unit key -> vector


class CandidateStore(TextArmStore):
    """Runs the candidate query (the vector arm fused with the text arm, `TextArmStore`) on
    the index replica."""

    def __init__(self, db: Database, schema: str, config: FindConfig) -> None:
        super().__init__(db, schema, config)
        self._tuner = HnswTuner(self.queries)

    def send_fuse(
        self,
        qvec: Sequence[float],
        filters: FindFilters,
        arm: TextArm,
        n_cand: int,
        *,
        chunk_vectors: bool = True,
        timings: dict[str, float] | None = None,
    ) -> PendingCandidates:
        """The vector arm fused with the text arm — candidate rows, best first; each with its
        chunk's vector unless `chunk_vectors` is False (`CandidateRow.embedding` None), and
        then still a chunk with no stored unit vectors — with its statement sent, read by
        `result()`: on the exact plan PostgreSQL scans the owner's vectors while the caller
        goes on (the HNSW plan, whose settings need a transaction, runs at once)."""
        t0 = time.perf_counter()
        timings = timings if timings is not None else {}
        query_sql, params = self._fused_statement(qvec, filters, arm, n_cand, chunk_vectors)

        def done(rows: list[CandidateRow]) -> Candidates:
            for row in rows:  # what a chunk of the text arm says came with the arm
                if row.tr is not None:
                    row.text_content, refs, row.context_type = arm.sources[row.tr - 1]
                    row.source_refs = list(refs)
            timings["sql_vector"] = (time.perf_counter() - t0) * 1000
            return Candidates(rows, arm.plan, arm.scope_rows, arm.idf, arm.text_terms)

        if arm.plan == "hnsw":
            rows = self._fetch(query_sql, params, arm.plan, n_cand, class_row(CandidateRow))
            return PendingCandidates(lambda: done(rows))
        what = f"find on {self.schema}.context_chunks"
        sent = SentStatement(self.db, query_sql, params, class_row(CandidateRow), what)
        return PendingCandidates(lambda: done(sent.rows()), sent)

    def _fused_statement(
        self,
        qvec: Sequence[float],
        filters: FindFilters,
        arm: TextArm,
        n_cand: int,
        chunk_vectors: bool,
    ) -> tuple[sql.Composed, dict[str, Any]]:
        cfg = self.config
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
        return query_sql, params

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
        with self.send_fuse(qvec, filters, arm, n_cand, timings=timings) as pending:
            return pending.result()

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

    def unit_vectors(self, chunk_ids: Sequence[str]) -> UnitRows:
        """The stored vectors of the units of these chunks: chunk id -> unit key -> vector
        (one query; a chunk without units maps to an empty dict)."""
        if not chunk_ids:
            return {}
        with self.db.autocommit() as conn:  # hundreds of vectors, decoded together
            rows = fetch_with_vectors(
                conn, self.queries["retrieval_unit_vectors"], {"ids": list(chunk_ids)}
            )
        return _by_chunk(chunk_ids, rows)

    def send_unit_vectors(self, chunk_ids: Sequence[str]) -> Pending[UnitRows] | None:
        """`unit_vectors` with its statement sent, read by `result()`: find fetches the
        text arm's chunks' while PostgreSQL runs the fused statement, on a second connection
        — one the pool has idle, else None (a find holding one never waits for another)."""
        what = f"find's unit vectors on {self.schema}.chunk_units"
        try:
            sent = SentStatement(
                self.db,
                self.queries["retrieval_unit_vectors"],
                {"ids": list(chunk_ids)},
                tuple_row,
                what,
                setup=raw_vectors,
                wait=False,
            )
        except NoIdleConnection:
            return None
        return Pending(lambda: _by_chunk(chunk_ids, split_vectors(sent.rows())), sent)

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

    def _tune(self, conn: psycopg.Connection[Any], limit: int) -> None:
        """Transaction-local HNSW settings: candidate list size and iterative scans."""
        cfg = self.config
        ef = max(cfg.ef_search, limit)
        self._tuner.tune(conn, ef, order="relaxed_order", max_scan_tuples=cfg.max_scan_tuples)


def _by_chunk(chunk_ids: Sequence[str], rows: Sequence[tuple[tuple[Any, ...], Any]]) -> UnitRows:
    out: UnitRows = {str(c): {} for c in chunk_ids}
    for (chunk_id, key), vec in rows:
        out.setdefault(str(chunk_id), {})[str(key)] = vec
    return out


__all__ = [
    "CandidateStore",
    "Candidates",
    "PendingCandidates",
    "UnitRows",
    "TextArm",
    "build_where",
]
