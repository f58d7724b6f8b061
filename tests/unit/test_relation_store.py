"""FSRelationStore: .relations.json format, stable ids, dedupe, upsert, remove, atomicity."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.errors import NodeNotFoundError, StorageError, TenancyError
from ctxpipe.core.models import ContextNode, RelationEdge
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS, FSRelationStore

NodeFactory = Callable[..., ContextNode]
A = "ctx://acme/users/u1/memories/entities/alpha"
B = "ctx://acme/users/u1/memories/entities/beta"
C = "ctx://acme/users/u1/memories/entities/gamma"


@pytest.fixture
def store(fs: ContextFS, make_node: NodeFactory) -> FSRelationStore:
    for uri in (A, B, C):
        fs.write_node(make_node(uri))
    return FSRelationStore(fs)


def edge(to: str, rtype: str = "related_to", **kw: Any) -> RelationEdge:
    return RelationEdge(from_uri=A, to_uri=to, relation_type=rtype, **kw)


def rel_file(fs: ContextFS, uri: str = A) -> Path:
    return fs.resolve_path(uri) / ".relations.json"


def test_no_edges_yet(store: FSRelationStore, fs: ContextFS) -> None:
    assert store.get_edges(A) == []
    assert not rel_file(fs).exists()


def test_missing_node(store: FSRelationStore) -> None:
    missing = "ctx://acme/users/u1/nothing"
    to_b = RelationEdge(from_uri="", to_uri=B)
    with pytest.raises(NodeNotFoundError):
        store.get_edges(missing)
    with pytest.raises(NodeNotFoundError):
        store.append_edges(missing, [to_b])
    with pytest.raises(NodeNotFoundError):
        store.upsert_edges(missing, [to_b])
    assert store.remove_edges(missing) == 0


def test_file_format_matches_the_spec(store: FSRelationStore, fs: ContextFS) -> None:
    when = datetime(2026, 3, 14, 10, 30, tzinfo=UTC)
    store.append_edges(A, [edge(B, reason="same project", weight=0.5, created_at=when)])
    doc = json.loads(rel_file(fs).read_text())
    assert set(doc) == {"edges", "updated_at"}
    assert doc["updated_at"].endswith("Z")
    [stored] = doc["edges"]
    assert stored == {
        "id": edge(B).edge_id,
        "to_uri": B,
        "relation_type": "related_to",
        "reason": "same project",
        "weight": 0.5,
        "created_at": "2026-03-14T10:30:00Z",
    }
    [back] = store.get_edges(A)
    assert back.from_uri == A and back.edge_id == stored["id"]
    assert back.created_at == when


def test_append_dedupes_by_stable_id(store: FSRelationStore, fs: ContextFS) -> None:
    store.append_edges(A, [edge(B), edge(C)])
    first = rel_file(fs).read_bytes()
    mtime = rel_file(fs).stat().st_mtime_ns
    again = store.append_edges(A, [edge(B, reason="other reason"), edge(C)])
    assert rel_file(fs).read_bytes() == first  # nothing changed: not even updated_at
    assert rel_file(fs).stat().st_mtime_ns == mtime
    assert [e.to_uri for e in again] == [B, C]
    assert again[0].reason == ""  # the stored edge is kept as it was
    # the same edge twice in one call is stored once; another type is another edge
    store.append_edges(A, [edge(B, "references"), edge(B, "references")])
    edges = store.get_edges(A)
    assert [(e.to_uri, e.relation_type) for e in edges] == [
        (B, "related_to"),
        (C, "related_to"),
        (B, "references"),
    ]
    assert len({e.edge_id for e in edges}) == 3


def test_append_stamps_created_at(store: FSRelationStore) -> None:
    before = datetime.now(UTC)
    [e] = store.append_edges(A, [edge(B)])
    assert e.created_at is not None and e.created_at >= before


def test_upsert_replaces_same_id(store: FSRelationStore) -> None:
    store.upsert_edges(A, [edge(B, reason="first", weight=1.0), edge(C)])
    [b0, c0] = store.get_edges(A)
    result = store.upsert_edges(A, [edge(B, reason="second", weight=0.25)])
    [b1, c1] = store.get_edges(A)
    assert result == [b1, c1]
    assert (b1.reason, b1.weight) == ("second", 0.25)
    assert b1.created_at == b0.created_at  # kept when the new edge has none
    assert c1 == c0
    explicit = datetime(2020, 1, 1, tzinfo=UTC)
    store.upsert_edges(A, [edge(B, reason="third", created_at=explicit)])
    assert store.get_edges(A)[0].created_at == explicit


def test_upsert_same_edges_is_a_no_op(store: FSRelationStore, fs: ContextFS) -> None:
    store.upsert_edges(A, [edge(B, reason="r")])
    data = rel_file(fs).read_bytes()
    store.upsert_edges(A, [edge(B, reason="r")])
    assert rel_file(fs).read_bytes() == data


def test_remove_edges(store: FSRelationStore) -> None:
    store.append_edges(A, [edge(B), edge(C), edge(B, "references"), edge(C, "part_of")])
    assert store.remove_edges(A, to_uris=[B], relation_types=["references"]) == 1
    assert store.remove_edges(A, relation_types=["part_of"]) == 1
    assert store.remove_edges(A, to_uris=[B + "/"]) == 1  # URIs compare as node identities
    assert [(e.to_uri, e.relation_type) for e in store.get_edges(A)] == [(C, "related_to")]
    assert store.remove_edges(A, to_uris=[]) == 0  # an empty filter matches nothing
    assert store.remove_edges(A, to_uris=["ctx://acme/users/u1/unrelated"]) == 0
    assert store.remove_edges(A) == 1  # no filter: everything
    assert store.get_edges(A) == []


def test_relations_do_not_bump_the_node_version(
    store: FSRelationStore, fs: ContextFS, make_node: NodeFactory
) -> None:
    meta_before = (fs.resolve_path(A) / ".meta.json").read_bytes()
    store.append_edges(A, [edge(B)])
    store.upsert_edges(A, [edge(C)])
    store.remove_edges(A, to_uris=[C])
    assert (fs.resolve_path(A) / ".meta.json").read_bytes() == meta_before
    assert fs.read_node(A).version == 1
    # and a node write keeps the relations
    fs.write_node(make_node(A, "changed"))
    assert [e.to_uri for e in store.get_edges(A)] == [B]
    assert fs.stat_node(A).size == sum(
        p.stat().st_size
        for p in fs.resolve_path(A).iterdir()
        if p.name not in (".lock", ".history.jsonl")
    )


def test_uris_are_normalised_and_validated(store: FSRelationStore) -> None:
    [e] = store.append_edges(A + "/", [RelationEdge(from_uri="", to_uri=B + "/")])
    assert (e.from_uri, e.to_uri) == (A, B)
    with pytest.raises(ValueError, match="cannot be stored on"):
        store.append_edges(A, [RelationEdge(from_uri=B, to_uri=C)])
    with pytest.raises(ValueError, match="to itself"):
        store.append_edges(A, [edge(A)])
    with pytest.raises(TenancyError):
        store.append_edges(A, [edge("ctx://globex/users/u1/x")])
    with pytest.raises(ValueError, match="invalid URI"):
        store.append_edges(A, [edge("ctx://acme/users/../x")])
    assert len(store.get_edges(A)) == 1


def test_tenancy_with_context(store: FSRelationStore) -> None:
    mine = RequestContext(account_id="acme", user_id="u1", session_id="s")
    theirs = RequestContext(account_id="globex", user_id="u1", session_id="s")
    store.append_edges(A, [edge(B)], ctx=mine)
    assert len(store.get_edges(A, ctx=mine)) == 1
    for call in (
        lambda: store.get_edges(A, ctx=theirs),
        lambda: store.append_edges(A, [edge(C)], ctx=theirs),
        lambda: store.upsert_edges(A, [edge(C)], ctx=theirs),
        lambda: store.remove_edges(A, ctx=theirs),
    ):
        with pytest.raises(TenancyError):
            call()
    assert len(store.get_edges(A)) == 1


def test_corrupt_relations_file(store: FSRelationStore, fs: ContextFS) -> None:
    rel_file(fs).write_text('{"edges": "nope"}')
    with pytest.raises(StorageError, match="corrupt .relations.json"):
        store.get_edges(A)


def test_interrupted_relations_write_keeps_the_old_file(
    store: FSRelationStore, fs: ContextFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.append_edges(A, [edge(B)])
    before = rel_file(fs).read_bytes()
    real_replace = os.replace

    def failing_replace(src: Any, dst: Any) -> None:
        if str(dst).endswith(".relations.json"):
            raise OSError(5, "injected")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="injected"):
        store.append_edges(A, [edge(C)])
    monkeypatch.undo()
    assert rel_file(fs).read_bytes() == before
    assert [p.name for p in fs.resolve_path(A).iterdir() if p.name.startswith(".tmp-")] == []
    assert [e.to_uri for e in FSRelationStore(ContextFS(fs.fs_root)).get_edges(A)] == [B]


def test_crashed_relations_temp_file_is_cleaned(store: FSRelationStore, fs: ContextFS) -> None:
    store.append_edges(A, [edge(B)])
    tmp = fs.resolve_path(A) / ".tmp-abc123-.relations.json"
    tmp.write_text('{"edges": []}')
    assert [e.to_uri for e in store.get_edges(A)] == [B]
    assert not tmp.exists()
