"""RelationWriter: derives a commit's edges and writes them through the RelationStore."""

from __future__ import annotations

from itertools import combinations

from ctxpipe.core.enums import MemoryCategory, RelationType, WriteAction
from ctxpipe.core.models import RelationEdge, RelationOp, WriteResult
from ctxpipe.fs import FSRelationStore

MAX_RELATED_ENTITIES = 8


def derive_edges(
    results: list[tuple[WriteResult, str]], archive_uri: str | None
) -> dict[str, list[RelationOp]]:
    """Edges per source URI: every written memory `derived_from` the session archive, and
    the entities written by one commit `related_to` each other (both directions)."""
    ops: dict[str, list[RelationEdge]] = {}
    written = [(r, cat) for r, cat in results if r.action is not WriteAction.SKIP and not r.error]
    if archive_uri:
        for r, _ in written:
            ops.setdefault(r.uri, []).append(
                RelationEdge(
                    from_uri=r.uri,
                    to_uri=archive_uri,
                    relation_type=RelationType.DERIVED_FROM,
                    reason="extracted from this session archive",
                )
            )
    entities = [r.uri for r, cat in written if cat == MemoryCategory.ENTITIES.value]
    for a, b in combinations(sorted(set(entities))[:MAX_RELATED_ENTITIES], 2):
        for x, y in ((a, b), (b, a)):
            ops.setdefault(x, []).append(
                RelationEdge(
                    from_uri=x,
                    to_uri=y,
                    relation_type=RelationType.RELATED_TO,
                    reason="mentioned in the same session",
                )
            )
    return {uri: [RelationOp(op="append", edges=edges)] for uri, edges in ops.items()}


class RelationWriter:
    def __init__(self, store: FSRelationStore) -> None:
        self._store = store

    def apply_edges(self, uri: str, relation_ops: list[RelationOp]) -> list[RelationEdge]:
        written: list[RelationEdge] = []
        for op in relation_ops:
            if op.op == "upsert":
                self._store.upsert_edges(uri, op.edges)
                written.extend(op.edges)
            elif op.op == "append":
                self._store.append_edges(uri, op.edges)
                written.extend(op.edges)
            elif op.op == "remove":
                self._store.remove_edges(uri, to_uris=[e.to_uri for e in op.edges])
        return written
