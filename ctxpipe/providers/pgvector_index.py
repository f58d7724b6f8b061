"""`VectorIndex` over the PostgreSQL + pgvector index replica (`{schema}.context_chunks`).

Cosine similarity (`1 - (embedding <=> q)`) over chunks of one level, joined to their node for
the L0 abstract. Every search is scoped to one account; owner space, category, context type,
parent and URI prefix narrow it further. All values are bound parameters; the schema name is
validated and quoted as an identifier.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from ctxpipe.core.errors import StorageError
from ctxpipe.providers.base import VectorHit
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_FILTER_KEYS = frozenset(
    {"account_id", "owner_space", "category", "level", "context_type", "parent_uri", "uri_prefix"}
)
# fetch more chunks than asked for: several chunks of one URI collapse into one hit
_OVERSAMPLE = 3
_MAX_TOP_K = 1000


def _as_list(value: Any, key: str) -> list[Any]:
    if isinstance(value, str | int):
        return [value]
    if isinstance(value, Iterable):
        items = list(value)
        if not all(isinstance(v, str | int) for v in items):
            raise ValueError(f"filter {key!r} must be a string or a list of strings")
        return items
    raise ValueError(f"filter {key!r} must be a string or a list of strings, not {value!r}")


def _vector_literal(vector: Sequence[float]) -> str:
    values = [float(x) for x in vector]
    if not values:
        raise ValueError("query_vector is empty")
    if not all(math.isfinite(x) for x in values):
        raise ValueError("query_vector contains NaN or infinite values")
    return "[" + ",".join(repr(x) for x in values) + "]"


def _version_tuple(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in (text or "0").split("."))
    except ValueError:
        return (0,)


class PgVectorIndex:
    """Similarity search over the index replica (the dedup prefilter and `find`)."""

    def __init__(self, db: Database, schema: str = "ctx", *, ef_search: int = 100) -> None:
        if not _SCHEMA_RE.match(schema):
            raise StorageError(f"invalid schema name {schema!r}")
        if ef_search < 1:
            raise ValueError("ef_search must be >= 1")
        self._db = db
        self.schema = schema
        self.ef_search = ef_search  # HNSW candidate list size (recall vs speed)
        self._iterative_scan: bool | None = None  # pgvector >= 0.8, probed on first search

    def __repr__(self) -> str:
        return f"PgVectorIndex({self._db!r}, schema={self.schema!r})"

    async def search(
        self,
        query_vector: list[float],
        filters: dict[str, Any],
        top_k: int = 10,
        level: int | None = 0,
    ) -> list[VectorHit]:
        """Best `top_k` nodes by cosine similarity of their `level` chunks (one hit per URI).

        `filters`: `account_id` (required), `owner_space`, `category`, `context_type`,
        `parent_uri` (each a value or a list of values), `level` (overrides the argument;
        None = any level), `uri_prefix`.
        """
        query, params = self._build(query_vector, filters, top_k, level)
        if query is None:
            return []
        return await asyncio.to_thread(self._run, query, params, top_k)

    async def has_rows(self, account_id: str, owner_space: str, category: str) -> bool:
        """Whether the owner has any indexed L0 chunk of `category` (skips needless embeds)."""
        return await asyncio.to_thread(self._has_rows, account_id, owner_space, category)

    def _has_rows(self, account_id: str, owner_space: str, category: str) -> bool:
        try:
            with self._db.connection() as conn:
                row = conn.execute(
                    Queries(self.schema)["chunks_exist_for_owner"],
                    {"account_id": account_id, "owner_space": owner_space, "category": category},
                ).fetchone()
        except psycopg.Error as exc:
            raise StorageError(f"index lookup failed: {' '.join(str(exc).split())}") from exc
        return bool(row and row[0])

    def search_sync(
        self,
        query_vector: list[float],
        filters: dict[str, Any],
        top_k: int = 10,
        level: int | None = 0,
    ) -> list[VectorHit]:
        query, params = self._build(query_vector, filters, top_k, level)
        return [] if query is None else self._run(query, params, top_k)

    # ------------------------------------------------------------------ internals
    def _build(
        self,
        query_vector: Sequence[float],
        filters: dict[str, Any],
        top_k: int,
        level: int | None,
    ) -> tuple[sql.Composed | None, dict[str, Any]]:
        unknown = sorted(set(filters) - _FILTER_KEYS)
        if unknown:
            raise ValueError(
                f"unknown vector search filter(s) {unknown}; known: {sorted(_FILTER_KEYS)}"
            )
        account = filters.get("account_id")
        if not isinstance(account, str) or not account:
            raise ValueError("vector search needs filters['account_id'] (tenancy scope)")
        params: dict[str, Any] = {"q": _vector_literal(query_vector), "account": account}
        where = [sql.SQL("c.account_id = %(account)s"), sql.SQL("c.embedding IS NOT NULL")]
        if top_k <= 0:
            return None, params

        level = filters.get("level", level)
        if level is not None:
            levels = _as_list(level, "level")
            if not levels:
                return None, params
            params["levels"] = [int(v) for v in levels]
            where.append(sql.SQL("c.level = ANY(%(levels)s)"))
        for key, column in (
            ("owner_space", "owner_space"),
            ("category", "category"),
            ("context_type", "context_type"),
            ("parent_uri", "parent_uri"),
        ):
            value = filters.get(key)
            if value is None:
                continue
            values = [str(v) for v in _as_list(value, key)]
            if not values:
                return None, params
            params[key] = values
            where.append(sql.SQL("c.{} = ANY(%({})s)").format(sql.Identifier(column), sql.SQL(key)))
        prefix = filters.get("uri_prefix")
        if prefix is not None:
            escaped = re.sub(r"([\\%_])", r"\\\1", str(prefix))
            params["uri_prefix"] = escaped + "%"
            where.append(sql.SQL("c.uri LIKE %(uri_prefix)s ESCAPE '\\'"))

        params["limit"] = min(int(top_k), _MAX_TOP_K) * _OVERSAMPLE
        query = sql.SQL(
            "SELECT c.uri, c.level, c.category, c.owner_space, c.context_type, c.chunk_id, "
            "c.chunk_index, c.text_content, c.source_refs, c.metadata, c.node_version, "
            "n.abstract_text, n.version, (c.embedding <=> %(q)s::vector) AS distance "
            "FROM {chunks} AS c JOIN {nodes} AS n "
            "ON n.uri = c.uri AND n.account_id = c.account_id "
            "WHERE {where} "
            "ORDER BY c.embedding <=> %(q)s::vector, c.uri, c.chunk_index "
            "LIMIT %(limit)s"
        ).format(
            chunks=sql.Identifier(self.schema, "context_chunks"),
            nodes=sql.Identifier(self.schema, "context_nodes"),
            where=sql.SQL(" AND ").join(where),
        )
        return query, params

    def _tune(self, conn: psycopg.Connection[Any], limit: int) -> None:
        """Transaction-local HNSW settings so filtered searches still return `limit` rows."""
        if self._iterative_scan is None:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            self._iterative_scan = _version_tuple(row[0] if row else None) >= (0, 8)
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true)", (str(max(self.ef_search, limit)),)
        )
        if self._iterative_scan:
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")

    def _run(self, query: sql.Composed, params: dict[str, Any], top_k: int) -> list[VectorHit]:
        try:
            with self._db.connection() as conn:
                self._tune(conn, int(params["limit"]))
                rows = conn.execute(query, params).fetchall()
        except psycopg.Error as exc:
            detail = " ".join(str(exc).split())
            raise StorageError(
                f"vector search on {self.schema}.context_chunks failed: {detail}"
            ) from exc
        hits: list[VectorHit] = []
        seen: set[str] = set()
        for row in rows:
            (uri, lvl, category, owner, ctype, chunk_id, chunk_index, text, refs, meta,
             node_version, abstract, version, distance) = row  # fmt: skip
            if uri in seen or distance is None or math.isnan(distance):
                continue
            seen.add(uri)
            metadata = dict(meta or {})
            metadata.update(
                chunk_id=chunk_id,
                chunk_index=chunk_index,
                context_type=ctype or "",
                source_refs=list(refs or []),
                text=text,
                version=version,
                node_version=node_version,
            )
            hits.append(
                VectorHit(
                    uri=uri,
                    score=1.0 - float(distance),
                    level=int(lvl),
                    category=category or "",
                    owner_space=owner or "",
                    abstract=abstract or "",
                    metadata=metadata,
                )
            )
            if len(hits) >= top_k:
                break
        return hits
