"""The one WHERE builder over the index replica's chunks, the query vector parameter, the
transaction-local HNSW settings — shared by `find` (retrieval/find/candidate_store.py) and the dedup
prefilter (providers/pgvector_index.py) — and stored vectors read back many at once (`find`'s
candidates' unit vectors, the index's unit vectors for reuse). The statements are named queries in
`sql/queries/vector.sql`; only bound parameters and quoted identifiers reach the SQL."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Buffer, Loader
from psycopg.pq import Format

from ctxpipe.storage.queries import Queries


@dataclass(frozen=True)
class ChunkScope:
    """Which chunks (alias ``c``) a statement may read. `account_id` always applies; a field
    left None does not narrow; an empty list matches nothing. `owner_spaces`: ``users/u1`` is
    that owner, a bare scope (``resources``) is every owner inside it."""

    account_id: str
    owner_spaces: Sequence[str] | None = None
    context_types: Sequence[str] | None = None
    categories: Sequence[str] | None = None
    parent_uris: Sequence[str] | None = None
    uris: Sequence[str] | None = None
    levels: Sequence[int] | None = None
    uri_prefixes: Sequence[str] | None = None


_COLUMNS = (
    ("context_types", "context_type"),
    ("categories", "category"),
    ("parent_uris", "parent_uri"),
    ("uris", "uri"),
)


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with `prefix` (wildcards escaped)."""
    return re.sub(r"([\\%_])", r"\\\1", prefix) + "%"


def chunk_where(
    scope: ChunkScope, *, scope_only: bool = False
) -> tuple[sql.Composed, dict[str, Any]]:
    """WHERE clause over ``c`` and its parameters. `scope_only`: account and owner spaces only
    (what the plan-choice statistics count)."""
    params: dict[str, Any] = {"account": scope.account_id}
    where: list[sql.Composable] = [sql.SQL("c.account_id = %(account)s")]
    if scope.owner_spaces is not None:
        exact = [s for s in scope.owner_spaces if "/" in s]
        scopes = [s for s in scope.owner_spaces if "/" not in s]
        parts: list[sql.Composable] = []
        if exact:
            params["spaces"] = exact
            parts.append(sql.SQL("c.owner_space = ANY(%(spaces)s)"))
        if scopes:
            params["space_scopes"] = scopes
            params["space_like"] = [s + "/%" for s in scopes]
            parts.append(sql.SQL("c.owner_space = ANY(%(space_scopes)s)"))
            parts.append(sql.SQL("c.owner_space LIKE ANY(%(space_like)s)"))
        where.append(
            sql.SQL("(") + sql.SQL(" OR ").join(parts) + sql.SQL(")") if parts else sql.SQL("false")
        )
    if not scope_only:
        for name, column in _COLUMNS:
            values = getattr(scope, name)
            if values is None:
                continue
            params[name] = [str(v) for v in values]
            where.append(
                sql.SQL("c.{} = ANY(%({})s)").format(sql.Identifier(column), sql.SQL(name))
            )
        if scope.levels is not None:
            params["levels"] = [int(v) for v in scope.levels]
            where.append(sql.SQL("c.level = ANY(%(levels)s)"))
        if scope.uri_prefixes is not None:
            params["uri_like"] = [like_prefix(p) for p in scope.uri_prefixes]
            where.append(sql.SQL("c.uri LIKE ANY(%(uri_like)s)"))
    return sql.SQL(" AND ").join(where), params


def vector_param(vector: Sequence[float]) -> np.ndarray:
    """A query vector as a bound parameter: float32, sent in pgvector's binary form (no text
    to format or parse); refuses an empty or non-finite one."""
    values = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not values.size or not bool(np.isfinite(values).all()):
        raise ValueError("query vector is empty or not finite (NaN or infinity)")
    return values


class _VectorBytes(Loader):
    """pgvector's binary form left undecoded, so that many are decoded at once (`vectors_of`)."""

    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def fetch_with_vectors(
    conn: psycopg.Connection[Any], query: Any, params: dict[str, Any]
) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """The rows of `query`, whose last column is a pgvector value, as (the other columns, the
    vector): the values are read in binary form and decoded together (`vectors_of`), not one
    pgvector object each."""
    with conn.cursor(binary=True) as cur:
        raw_vectors(cur)
        cur.execute(query, params)
        rows = cur.fetchall()
    return split_vectors(rows)


def raw_vectors(cur: psycopg.Cursor[Any]) -> None:
    """Have `cur` leave pgvector values in binary form, for `split_vectors`."""
    info = cur.connection.adapters.types.get("vector")
    if info is not None:
        cur.adapters.register_loader(info.oid, _VectorBytes)


def split_vectors(rows: Sequence[Sequence[Any]]) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """Rows whose last column is a pgvector value in binary form (`raw_vectors`) as (the
    other columns, the vector), the vectors decoded together."""
    vectors = vectors_of([r[-1] for r in rows])
    return [(tuple(r[:-1]), v) for r, v in zip(rows, vectors, strict=True)]


def vectors_of(blobs: Sequence[bytes]) -> np.ndarray:
    """pgvector values in binary form (a 2-byte dimension, 2 unused bytes, big-endian float32s)
    as one float32 array of shape (n, dimension), decoded in one pass; refuses values of
    different dimensions."""
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    size = len(blobs[0])
    dim = int.from_bytes(blobs[0][:2], "big") if size >= 4 else -1
    if size != 4 + 4 * dim or any(len(b) != size for b in blobs):
        raise ValueError("vectors of different dimensions (or not pgvector's binary form)")
    words = np.frombuffer(b"".join(blobs), dtype=">f4").reshape(len(blobs), 1 + dim)
    return words[:, 1:].astype(np.float32)


class HnswTuner:
    """Transaction-local HNSW settings (`hnsw.ef_search`, and with pgvector ≥ 0.8 iterative
    scans so that a filtered search still returns its rows). The extension's version is read
    once per tuner."""

    def __init__(self, queries: Queries) -> None:
        self.queries = queries
        self._iterative: bool | None = None

    def iterative(self, conn: psycopg.Connection[Any]) -> bool:
        if self._iterative is None:
            row = conn.execute(self.queries["pgvector_version"]).fetchone()
            text = str(row[0] if row and row[0] else "0")
            version = tuple(int(p) for p in text.split(".") if p.isdigit())
            self._iterative = version >= (0, 8)
        return self._iterative

    def tune(
        self,
        conn: psycopg.Connection[Any],
        ef_search: int,
        *,
        order: str = "relaxed_order",
        max_scan_tuples: int = 20_000,
    ) -> None:
        if order not in ("relaxed_order", "strict_order"):
            raise ValueError(f"iterative scan order {order!r}")
        if self.iterative(conn):
            conn.execute(
                self.queries["hnsw_tune_iterative"],
                {"ef": str(ef_search), "order": order, "max_tuples": str(max_scan_tuples)},
            )
        else:
            conn.execute(self.queries["hnsw_tune"], {"ef": str(ef_search)})


__all__ = [
    "ChunkScope",
    "HnswTuner",
    "chunk_where",
    "fetch_with_vectors",
    "like_prefix",
    "vector_param",
    "vectors_of",
]
