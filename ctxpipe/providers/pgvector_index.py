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
from ctxpipe.storage.chunk_sql import ChunkScope, HnswTuner, chunk_where, vector_param
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
        self._queries = Queries(schema)
        self._tuner = HnswTuner(self._queries)

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
        params = {"account_id": account_id, "owner_space": owner_space, "category": category}
        rows = await asyncio.to_thread(self._named, "chunks_exist_for_owner", params)
        return bool(rows and rows[0][0])

    async def unindexed(self, account_id: str, prefix: str, limit: int = 50) -> list[str]:
        """URIs under `prefix` whose upsert is still in the outbox: written to the FS, not yet
        in the replica (the dedup prefilter reads them from the FS)."""
        params = {"account_id": account_id, "prefix": prefix, "limit": limit}
        rows = await asyncio.to_thread(self._named, "outbox_unindexed_uris", params)
        return [str(r[0]) for r in rows]

    def _named(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The rows of named query `query`; a database error is a `StorageError`."""
        try:
            with self._db.connection() as conn:
                return list(conn.execute(self._queries[query], params).fetchall())
        except psycopg.Error as exc:
            raise StorageError(f"{query} failed: {' '.join(str(exc).split())}") from exc

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
        if top_k <= 0:
            return None, {}
        level = filters.get("level", level)
        lists: dict[str, list[Any] | None] = {}
        for key, name in (
            ("owner_space", "owner_spaces"),
            ("category", "categories"),
            ("context_type", "context_types"),
            ("parent_uri", "parent_uris"),
        ):
            value = filters.get(key)
            lists[name] = None if value is None else [str(v) for v in _as_list(value, key)]
        levels = None if level is None else [int(v) for v in _as_list(level, "level")]
        if levels == [] or any(v == [] for v in lists.values()):
            return None, {}
        prefix = filters.get("uri_prefix")
        scope = ChunkScope(
            account_id=account,
            levels=levels,
            uri_prefixes=None if prefix is None else [str(prefix)],
            **lists,
        )
        where, params = chunk_where(scope)
        params["q"] = vector_param(query_vector)
        params["limit"] = min(int(top_k), _MAX_TOP_K) * _OVERSAMPLE
        return sql.SQL(self._queries["vector_search_nodes"]).format(where=where), params

    def _run(self, query: sql.Composed, params: dict[str, Any], top_k: int) -> list[VectorHit]:
        try:
            with self._db.connection() as conn:
                ef = max(self.ef_search, int(params["limit"]))
                self._tuner.tune(conn, ef, order="strict_order")
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
