"""FSRelationStore: a node's outgoing edges in its ``.relations.json``.

Format::

    {"edges": [{"id", "to_uri", "relation_type", "reason", "weight", "created_at"}],
     "updated_at": "…Z"}

The edge id is `RelationEdge.edge_id` (stable hash of from/to/type), so appending the same edge
twice keeps one. Writes hold the node's exclusive lock and replace the file atomically; they do
not bump the node's content version, and a write that changes nothing leaves the file untouched.
Edges never cross accounts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ctxpipe.core.errors import NodeNotFoundError, StorageError, TenancyError
from ctxpipe.core.models import RelationEdge, utcnow
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI, node_uri, parse_uri
from ctxpipe.fs.atomic import RELATIONS_FILE, atomic_write_file
from ctxpipe.fs.context_fs import ContextFS, UriLike


class StoredEdge(BaseModel):
    id: str
    to_uri: str
    relation_type: str = "related_to"
    reason: str = ""
    weight: float = 1.0
    created_at: datetime | None = None


class RelationsDoc(BaseModel):
    edges: list[StoredEdge] = Field(default_factory=list)
    updated_at: datetime | None = None


def _parse_doc(raw: bytes | None, nid: str) -> RelationsDoc:
    if raw is None:
        return RelationsDoc()
    try:
        return RelationsDoc.model_validate_json(raw)
    except ValidationError as exc:
        raise StorageError(f"corrupt {RELATIONS_FILE} of {nid}: {exc}") from exc


def _to_edges(nid: str, doc: RelationsDoc) -> list[RelationEdge]:
    return [
        RelationEdge(
            from_uri=nid,
            to_uri=e.to_uri,
            relation_type=e.relation_type,
            reason=e.reason,
            weight=e.weight,
            created_at=e.created_at,
        )
        for e in doc.edges
    ]


def _stored(edge: RelationEdge) -> StoredEdge:
    return StoredEdge(
        id=edge.edge_id,
        to_uri=edge.to_uri,
        relation_type=edge.relation_type,
        reason=edge.reason,
        weight=edge.weight,
        created_at=edge.created_at,
    )


class FSRelationStore:
    """`RelationStore` on the ContextFS (sync API)."""

    def __init__(self, fs: ContextFS) -> None:
        self.fs = fs

    # ------------------------------------------------------------------ reading
    def get_edges(self, uri: UriLike, ctx: RequestContext | None = None) -> list[RelationEdge]:
        """Outgoing edges of a node, in stored order (`NodeNotFoundError` if no such node)."""
        nid = node_uri(self.fs.parse(uri, ctx))
        raw = self.fs.read_file(uri, RELATIONS_FILE, ctx)
        return _to_edges(nid, _parse_doc(raw, nid))

    # ------------------------------------------------------------------ writing
    def upsert_edges(
        self, uri: UriLike, edges: Iterable[RelationEdge], ctx: RequestContext | None = None
    ) -> list[RelationEdge]:
        """Insert edges, replacing stored ones with the same id (created_at kept if unset)."""
        u = self.fs.parse(uri, ctx)
        incoming = self._normalize(u, edges)

        def change(current: list[RelationEdge]) -> list[RelationEdge]:
            by_id = {e.edge_id: i for i, e in enumerate(current)}
            out = list(current)
            now = utcnow()
            for edge in incoming:
                i = by_id.get(edge.edge_id)
                if i is None:
                    by_id[edge.edge_id] = len(out)
                    out.append(
                        edge if edge.created_at else edge.model_copy(update={"created_at": now})
                    )
                else:
                    created = edge.created_at or out[i].created_at or now
                    out[i] = edge.model_copy(update={"created_at": created})
            return out

        return self._update(u, change)

    def append_edges(
        self, uri: UriLike, edges: Iterable[RelationEdge], ctx: RequestContext | None = None
    ) -> list[RelationEdge]:
        """Add edges whose id is not stored yet; an edge already present is left as it is."""
        u = self.fs.parse(uri, ctx)
        incoming = self._normalize(u, edges)

        def change(current: list[RelationEdge]) -> list[RelationEdge]:
            seen = {e.edge_id for e in current}
            out = list(current)
            now = utcnow()
            for edge in incoming:
                if edge.edge_id in seen:
                    continue
                seen.add(edge.edge_id)
                out.append(edge if edge.created_at else edge.model_copy(update={"created_at": now}))
            return out

        return self._update(u, change)

    def remove_edges(
        self,
        uri: UriLike,
        to_uris: Iterable[str] | None = None,
        relation_types: Iterable[str] | None = None,
        ctx: RequestContext | None = None,
    ) -> int:
        """Remove edges matching both filters (None = any); returns how many were removed.

        A missing node has no edges: 0. With both filters None every edge is removed.
        """
        u = self.fs.parse(uri, ctx)
        targets = None if to_uris is None else {node_uri(t) for t in to_uris}
        types = None if relation_types is None else set(relation_types)

        def doomed(e: RelationEdge) -> bool:
            return (targets is None or e.to_uri in targets) and (
                types is None or e.relation_type in types
            )

        removed = 0

        def change(current: list[RelationEdge]) -> list[RelationEdge]:
            nonlocal removed
            kept = [e for e in current if not doomed(e)]
            removed = len(current) - len(kept)
            return kept

        try:
            self._update(u, change)
        except NodeNotFoundError:
            return 0
        return removed

    # ------------------------------------------------------------------ internals
    def _normalize(self, u: CtxURI, edges: Iterable[RelationEdge]) -> list[RelationEdge]:
        nid = node_uri(u)
        out: list[RelationEdge] = []
        for edge in edges:
            if edge.from_uri and node_uri(edge.from_uri) != nid:
                raise ValueError(f"edge from {edge.from_uri} cannot be stored on {nid}")
            to = parse_uri(edge.to_uri)
            if to.account != u.account:
                raise TenancyError(str(to), u.account)
            target = node_uri(to)
            if target == nid:
                raise ValueError(f"edge from {nid} to itself")
            out.append(edge.model_copy(update={"from_uri": nid, "to_uri": target}))
        return out

    def _update(
        self, u: CtxURI, change: Callable[[list[RelationEdge]], list[RelationEdge]]
    ) -> list[RelationEdge]:
        nid = node_uri(u)
        with self.fs.locked(u) as path:
            current = _to_edges(nid, _parse_doc(_read(path), nid))
            new = change(current)
            if [e.model_dump() for e in new] == [e.model_dump() for e in current]:
                return current  # nothing changes: leave the file (and its updated_at) alone
            doc = RelationsDoc(edges=[_stored(e) for e in new], updated_at=utcnow())
            data = doc.model_dump_json(indent=2) + "\n"
            atomic_write_file(path / RELATIONS_FILE, data.encode("utf-8"))
        return new


def _read(path: Path) -> bytes | None:
    try:
        return (path / RELATIONS_FILE).read_bytes()
    except FileNotFoundError:
        return None
