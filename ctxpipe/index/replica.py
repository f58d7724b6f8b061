"""ReplicaStore: the SQL side of the index replica (`context_nodes`, `context_chunks` with the
vectors of their units in `chunk_units`, `relation_edges`, `repair_runs`). Set-based: one round
trip per statement for a whole batch, chunks and units written with binary COPY. Nothing here
reads the FS or runs the model."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ctxpipe.core.errors import EmbeddingError
from ctxpipe.core.models import ChunkRecord, ContextNode, RelationEdge
from ctxpipe.core.uri import CtxURI
from ctxpipe.storage.chunk_sql import fetch_with_vectors
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

# Binary COPY needs the column types, in the column order of `index_copy_chunks`.
COPY_TYPES = [
    "varchar",
    "varchar",
    "varchar",
    "varchar",
    "int2",
    "int2",
    "text",
    "vector",
    "varchar",
    "varchar",
    "varchar",
    "jsonb",
    "jsonb",
    "int4",
    "int4",
    "text[]",
    "text",
    "text",
    "text",
]


@dataclass(frozen=True)
class NodeState:
    uri: str
    version: int
    content_hash: str


@dataclass
class NodeWrite:
    """One node to (re)place in the replica with its embedded chunks."""

    node: ContextNode
    chunks: list[ChunkRecord]
    vectors: list[Any]  # one vector per chunk (list[float] or numpy array)
    # per chunk: (unit_key, vector) of each distinct line/sentence text find ranks
    units: list[list[tuple[str, Any]]] = field(default_factory=list)


class ReplicaRows(Protocol):
    """What the indexer reads and writes of the replica (`ReplicaStore`; `MemoryReplica` holds
    the same rows in memory)."""

    def check_dimension(self, model_name: str, model_dim: int) -> int: ...
    def node_states(self, uris: Iterable[str]) -> dict[str, NodeState]: ...
    def all_node_states(self) -> dict[str, NodeState]: ...
    def edge_ids(self) -> dict[str, set[str]]: ...
    def truncate(self) -> None: ...
    def vector_index_deferred(self) -> AbstractContextManager[None]: ...
    def ensure_vector_index(self) -> None: ...
    def uris_under(self, uri: str) -> list[str]: ...
    def chunk_vectors(self, uris: Sequence[str], model: str) -> dict[str, Any]: ...
    def unit_vectors(self, uris: Sequence[str], model: str) -> dict[str, dict[str, Any]]: ...
    def write(
        self,
        writes: Sequence[NodeWrite],
        deletes: Sequence[str] = (),
        *,
        rewrite: bool = False,
        replace: Iterable[str] = (),
    ) -> tuple[set[str], set[str]]: ...
    def replace_edges(self, edges_by_uri: dict[str, list[RelationEdge]]) -> int: ...


def like_prefix(uri: str) -> str:
    """LIKE pattern matching the descendants of `uri` (``uri/…``), wildcards escaped."""
    escaped = uri.rstrip("/").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"


def as_array(vec: Any) -> np.ndarray[Any, Any]:
    """A float32 array from a list, an array or a pgvector `Vector`."""
    if hasattr(vec, "to_numpy"):
        vec = vec.to_numpy()
    return np.asarray(vec, dtype=np.float32)


def json_text(metadata: Mapping[str, Any], key: str) -> str | None:
    """`metadata ->> key` as PostgreSQL gives it: a string as it is, another JSON value as
    its JSON text, None when absent or null."""
    value = metadata.get(key)
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _account(uri: str) -> str:
    return CtxURI.parse(uri).account


def _fs_path(uri: str) -> str:
    u = CtxURI.parse(uri)
    return "/".join((u.account, u.scope, *u.segments))


class ReplicaStore:
    def __init__(self, db: Database, schema: str = "ctx") -> None:
        self.db = db
        self.schema = schema
        self._q = Queries(schema)

    # ------------------------------------------------------------------ reading
    def node_states(self, uris: Iterable[str]) -> dict[str, NodeState]:
        wanted = sorted(set(uris))
        if not wanted:
            return {}
        with self.db.connection() as conn:
            rows = conn.execute(self._q["index_node_states"], {"uris": wanted}).fetchall()
        return {r[0]: NodeState(r[0], int(r[1]), r[2] or "") for r in rows}

    def all_node_states(self) -> dict[str, NodeState]:
        with self.db.connection() as conn:
            rows = conn.execute(self._q["index_all_node_states"]).fetchall()
        return {r[0]: NodeState(r[0], int(r[1]), r[2] or "") for r in rows}

    def edge_ids(self) -> dict[str, set[str]]:
        """Replica edge ids per source URI."""
        out: dict[str, set[str]] = {}
        with self.db.connection() as conn:
            for from_uri, eid in conn.execute(self._q["index_edge_ids"]).fetchall():
                out.setdefault(from_uri, set()).add(eid)
        return out

    def inflight_uris(self) -> set[str]:
        """URIs with an outbox event still to be processed (pending, claimed or failed)."""
        with self.db.connection() as conn:
            rows = conn.execute(self._q["index_inflight_uris"]).fetchall()
        return {r[0] for r in rows}

    def uris_under(self, uri: str) -> list[str]:
        """`uri` and its descendants that have a replica row."""
        with self.db.connection() as conn:
            rows = conn.execute(
                self._q["index_uris_under"], {"uri": uri, "prefix": like_prefix(uri)}
            ).fetchall()
        return sorted(r[0] for r in rows)

    def chunk_vectors(self, uris: Sequence[str], model: str) -> dict[str, Any]:
        """Stored embeddings by chunk text, of chunks embedded by `model` (so moved rows and
        unchanged texts of an updated node are not embedded again)."""
        if not uris:
            return {}
        with self.db.connection() as conn:
            rows = conn.execute(
                self._q["index_chunk_vectors"], {"uris": list(uris), "model": model}
            ).fetchall()
        return {text: as_array(vec) for text, vec in rows}

    def unit_vectors(self, uris: Sequence[str], model: str) -> dict[str, dict[str, Any]]:
        """Stored unit vectors of the chunks of `uris` embedded by `model`, by chunk text, then
        by unit key: a unit's vector is pooled from its chunk's reading, so it is reused only
        where the whole chunk text is unchanged."""
        if not uris:
            return {}
        out: dict[str, dict[str, Any]] = {}
        params = {"uris": list(uris), "model": model}
        with self.db.connection() as conn:
            rows = fetch_with_vectors(conn, self._q["index_unit_vectors"], params)
        for (text, key), vec in rows:
            out.setdefault(text, {})[key] = vec
        return out

    def counts(self) -> dict[str, int]:
        with self.db.connection() as conn:
            row = conn.execute(self._q["index_counts"]).fetchone()
        nodes, chunks, edges, units = row if row else (0, 0, 0, 0)
        return {
            "nodes": int(nodes),
            "chunks": int(chunks),
            "edges": int(edges),
            "units": int(units),
        }

    def vector_dimension(self) -> int | None:
        """The declared size of ``context_chunks.embedding`` (None: table or column missing)."""
        with self.db.connection() as conn:
            row = conn.execute(
                self._q["index_vector_dim"], {"table": f"{self.schema}.context_chunks"}
            ).fetchone()
        if row is None or row[0] is None or int(row[0]) <= 0:
            return None
        return int(row[0])

    def check_dimension(self, model_name: str, model_dim: int) -> int:
        """Fail with one clear line when the model's vectors do not fit the schema column."""
        column = self.vector_dimension()
        if column is None:
            raise EmbeddingError(
                f"the index replica has no {self.schema}.context_chunks.embedding column: "
                "run `ctxpipe db migrate` first"
            )
        if column != model_dim:
            raise EmbeddingError(
                f"embedding model {model_name!r} produces {model_dim}-dimensional vectors but "
                f"{self.schema}.context_chunks.embedding is vector({column}); set "
                f"CTXPIPE_EMBEDDING_MODEL to a {column}-dimensional model, or rebuild the "
                f"replica with CTXPIPE_EMBEDDING_DIM={model_dim} (a new schema, then "
                "`ctxpipe db migrate` and `ctxpipe reindex`)"
            )
        return column

    # ------------------------------------------------------------------ writing
    def write(
        self,
        writes: Sequence[NodeWrite],
        deletes: Sequence[str] = (),
        *,
        rewrite: bool = False,
        replace: Iterable[str] = (),
    ) -> tuple[set[str], set[str]]:
        """In ONE transaction: upsert node rows, replace the chunks (and their unit vectors) of
        every row actually written, delete the rows (chunks, outgoing edges) of `deletes`.

        A row is never replaced by an older version; the same version is replaced when its
        content differs or with `rewrite` (reindex). `replace`: URIs whose row may go back to
        an older version (repair: the FS is the truth). Returns (URIs written, URIs deleted)."""
        written: set[str] = set()
        deleted: set[str] = set()
        with self.db.connection() as conn:
            if writes:
                written = self._upsert_nodes(conn, writes, rewrite, set(replace))
            if written:
                conn.execute(self._q["index_delete_chunks"], {"uris": sorted(written)})
                self._copy_chunks(conn, [w for w in writes if w.node.uri in written])
                self._copy_units(conn, [w for w in writes if w.node.uri in written])
            if deletes:
                uris = sorted(set(deletes))
                rows = conn.execute(self._q["index_delete_nodes"], {"uris": uris}).fetchall()
                deleted = {r[0] for r in rows}
                conn.execute(self._q["index_delete_edges_from"], {"uris": uris})
        return written, deleted

    def _upsert_nodes(
        self,
        conn: psycopg.Connection[Any],
        writes: Sequence[NodeWrite],
        rewrite: bool,
        replace: set[str],
    ) -> set[str]:
        params = []
        for w in sorted(writes, key=lambda w: w.node.uri):  # one lock order: no deadlocks
            n = w.node
            params.append(
                {
                    "uri": n.uri,
                    "account_id": _account(n.uri),
                    "parent_uri": n.parent_uri or None,
                    "context_type": n.context_type.value,
                    "category": n.category or "",
                    "owner_space": n.owner_space,
                    "abstract_text": n.abstract,
                    "version": n.version,
                    "content_hash": n.content_hash,
                    "source_refs": Jsonb(list(n.source_refs)),
                    "metadata": Jsonb(n.metadata),
                    "fs_path": _fs_path(n.uri),
                    "created_at": n.created_at,
                    "updated_at": n.updated_at,
                    "rewrite": rewrite,
                    "replace": n.uri in replace,
                }
            )
        written: set[str] = set()
        with conn.cursor() as cur:
            cur.executemany(self._q["index_upsert_node"], params, returning=True)
            while True:
                row = cur.fetchone()
                if row is not None:
                    written.add(row[0])
                if not cur.nextset():
                    break
        return written

    def _copy_chunks(self, conn: psycopg.Connection[Any], writes: Sequence[NodeWrite]) -> None:
        with conn.cursor() as cur, cur.copy(self._q["index_copy_chunks"]) as copy:
            copy.set_types(COPY_TYPES)
            for w in writes:
                account = _account(w.node.uri)
                meta = w.node.metadata
                event_time, observed_at = (
                    json_text(meta, "event_time"),
                    json_text(meta, "observed_at"),
                )
                units = w.units or [[] for _ in w.chunks]
                for chunk, vec, own in zip(w.chunks, w.vectors, units, strict=True):
                    copy.write_row(
                        (
                            chunk.chunk_id,
                            chunk.uri,
                            account,
                            chunk.parent_uri or None,
                            chunk.level,
                            chunk.chunk_index,
                            chunk.text_content,
                            as_array(vec),
                            chunk.context_type,
                            chunk.category,
                            chunk.owner_space,
                            Jsonb(chunk.source_refs),
                            Jsonb(chunk.metadata),
                            w.node.version,
                            len(own),
                            [str(r) for r in chunk.source_refs],
                            w.node.abstract,
                            event_time,
                            observed_at,
                        )
                    )

    def _copy_units(self, conn: psycopg.Connection[Any], writes: Sequence[NodeWrite]) -> None:
        if not any(w.units for w in writes):
            return
        with conn.cursor() as cur, cur.copy(self._q["index_copy_units"]) as copy:
            copy.set_types(["varchar", "varchar", "vector"])
            for w in writes:
                for chunk, units in zip(w.chunks, w.units, strict=True):
                    for key, vec in units:
                        copy.write_row((chunk.chunk_id, key, as_array(vec)))

    def replace_edges(self, edges_by_uri: dict[str, list[RelationEdge]]) -> int:
        """Make the replica edges of each source URI exactly the given ones (one transaction)."""
        if not edges_by_uri:
            return 0
        rows = [
            {
                "id": e.edge_id,
                "account_id": _account(uri),
                "from_uri": uri,
                "to_uri": e.to_uri,
                "relation_type": e.relation_type,
                "reason": e.reason,
                "weight": e.weight,
                "created_at": e.created_at,
            }
            for uri, edges in edges_by_uri.items()
            for e in edges
        ]
        with self.db.connection() as conn:
            conn.execute(self._q["index_delete_edges_from"], {"uris": sorted(edges_by_uri)})
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(self._q["index_insert_edge"], rows)
        return len(rows)

    def truncate(self) -> None:
        with self.db.connection() as conn:
            conn.execute(self._q["index_truncate"])

    @contextmanager
    def vector_index_deferred(self) -> Iterator[None]:
        """Rows written inside go in without the HNSW index of the chunks' vectors, which is
        built once on the way out (also when the block fails): for a bulk load, as a clean
        reindex is. Reads meanwhile scan the vectors instead."""
        with self.db.connection() as conn:
            conn.execute(self._q["index_vector_index_drop"])
        try:
            yield
        finally:
            self.ensure_vector_index()

    def ensure_vector_index(self) -> None:
        """Build the HNSW index of the chunks' vectors if it is missing (a clean reindex killed
        before it built it again)."""
        with self.db.connection() as conn:
            conn.execute(self._q["index_vector_index_build"])

    # ------------------------------------------------------------------ repair runs
    def last_repair(self) -> dict[str, Any] | None:
        with self.db.connection() as conn, conn.cursor() as cur:
            row = cur.execute(self._q["index_repair_last"]).fetchone()
            if row is None:
                return None
            names = [d.name for d in cur.description or []]
        return dict(zip(names, row, strict=True))

    def record_repair(self, started_at: datetime, mode: str, counts: dict[str, Any]) -> int:
        params = {
            "started_at": started_at,
            "mode": mode,
            "missing": counts.get("missing", 0),
            "stale": counts.get("stale", 0),
            "orphaned": counts.get("orphaned", 0),
            "relations": counts.get("relations", 0),
            "compared": counts.get("compared", 0),
            "in_flight": counts.get("in_flight", 0),
            "events_queued": counts.get("events_queued", 0),
            "fs_nodes": counts.get("fs_nodes", 0),
            "replica_nodes": counts.get("replica_nodes", 0),
            "last_fs_mtime": counts.get("last_fs_mtime"),
        }
        with self.db.connection() as conn:
            row = conn.execute(self._q["index_repair_record"], params).fetchone()
        return int(row[0]) if row else 0


__all__ = ["NodeState", "NodeWrite", "ReplicaStore", "like_prefix"]
