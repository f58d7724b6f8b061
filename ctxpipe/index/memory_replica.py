"""MemoryReplica: the index replica's rows held in memory, with `ReplicaStore`'s rules for what
the indexer reads and writes (never regress a version, replace a node's chunks with its row).

For measuring the index path where no PostgreSQL runs (`bench/index_throughput.py --no-db` on a
GPU machine) and for tests of the indexer that need no server. It holds no SQL and no search:
`find` needs the real replica.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ctxpipe.core.errors import EmbeddingError
from ctxpipe.core.models import RelationEdge
from ctxpipe.index.replica import NodeState, NodeWrite, as_array


@dataclass
class MemoryReplica:
    """The rows `Indexer` writes, by URI; `dimension` is the vector column's size."""

    dimension: int
    nodes: dict[str, NodeWrite] = field(default_factory=dict)
    edges: dict[str, list[RelationEdge]] = field(default_factory=dict)

    def check_dimension(self, model_name: str, model_dim: int) -> int:
        if model_dim != self.dimension:
            raise EmbeddingError(
                f"embedding model {model_name!r} produces {model_dim}-dimensional vectors but "
                f"the replica holds {self.dimension}"
            )
        return self.dimension

    def node_states(self, uris: Iterable[str]) -> dict[str, NodeState]:
        out = {}
        for uri in uris:
            w = self.nodes.get(uri)
            if w is not None:
                out[uri] = NodeState(uri, w.node.version, w.node.content_hash)
        return out

    def all_node_states(self) -> dict[str, NodeState]:
        return self.node_states(list(self.nodes))

    def edge_ids(self) -> dict[str, set[str]]:
        return {uri: {e.edge_id for e in edges} for uri, edges in self.edges.items() if edges}

    def truncate(self) -> None:
        self.nodes.clear()
        self.edges.clear()

    @contextmanager
    def vector_index_deferred(self) -> Iterator[None]:
        """No index to defer in memory."""
        yield

    def ensure_vector_index(self) -> None:
        """No index to build in memory."""

    def uris_under(self, uri: str) -> list[str]:
        prefix = uri.rstrip("/") + "/"
        return sorted(u for u in self.nodes if u == uri or u.startswith(prefix))

    def chunk_vectors(self, uris: Sequence[str], model: str) -> dict[str, Any]:
        return {
            c.text_content: as_array(v)
            for uri in uris
            if (w := self.nodes.get(uri)) is not None
            for c, v in zip(w.chunks, w.vectors, strict=True)
            if c.metadata.get("model") == model
        }

    def unit_vectors(self, uris: Sequence[str], model: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for uri in uris:
            w = self.nodes.get(uri)
            if w is None:
                continue
            for c, units in zip(w.chunks, w.units, strict=True):
                if c.metadata.get("model") == model:
                    held = out.setdefault(c.text_content, {})
                    held.update((key, as_array(v)) for key, v in units)
        return out

    def write(
        self,
        writes: Sequence[NodeWrite],
        deletes: Sequence[str] = (),
        *,
        rewrite: bool = False,
        replace: Iterable[str] = (),
    ) -> tuple[set[str], set[str]]:
        """`ReplicaStore.write`'s rule: a row is replaced by a newer version, by the same one
        when its content differs or with `rewrite`, by an older one only when in `replace`."""
        back = set(replace)
        written: set[str] = set()
        for w in writes:
            old = self.nodes.get(w.node.uri)
            if old is not None and w.node.uri not in back:
                if w.node.version < old.node.version:
                    continue
                same = old.node.content_hash == w.node.content_hash
                if w.node.version == old.node.version and same and not rewrite:
                    continue
            if any(v is None for v in w.vectors):
                raise EmbeddingError(f"{w.node.uri}: a chunk without a vector")
            self.nodes[w.node.uri] = w
            written.add(w.node.uri)
        deleted = {u for u in set(deletes) if self.nodes.pop(u, None) is not None}
        for uri in deleted:
            self.edges.pop(uri, None)
        return written, deleted

    def replace_edges(self, edges_by_uri: dict[str, list[RelationEdge]]) -> int:
        for uri, edges in edges_by_uri.items():
            self.edges[uri] = list(edges)
        return sum(len(e) for e in edges_by_uri.values())

    def counts(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "chunks": sum(len(w.chunks) for w in self.nodes.values()),
            "edges": sum(len(e) for e in self.edges.values()),
            "units": sum(len(u) for w in self.nodes.values() for u in w.units),
        }


__all__ = ["MemoryReplica"]
