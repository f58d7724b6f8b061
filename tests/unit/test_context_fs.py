"""ContextFS nodes: layout, versioning, idempotence, tenancy, stat.

Tree operations (listing, delete, L0/L1 lookup, walking) are in test_context_fs_tree.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from ctxpipe.core.enums import ContextType
from ctxpipe.core.errors import (
    InvalidURIError,
    NodeNotFoundError,
    StorageError,
    TenancyError,
    VersionConflictError,
)
from ctxpipe.core.models import ContextNode, content_hash
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs import ContextFS

NodeFactory = Callable[..., ContextNode]
URI = "ctx://acme/users/u1/memories/profile/name"


def node_files(fs: ContextFS, uri: str) -> dict[str, bytes]:
    """Every file of a node dir except its lock file, with contents."""
    d = fs.resolve_path(uri)
    return {
        p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file() and p.name != ".lock"
    }


def node_mtimes(fs: ContextFS, uri: str) -> dict[str, int]:
    d = fs.resolve_path(uri)
    return {p.name: p.stat().st_mtime_ns for p in d.iterdir() if p.is_file()}


@pytest.fixture
def acme_ctx() -> RequestContext:
    return RequestContext(account_id="acme", user_id="u1", session_id="s1")


# ---------------------------------------------------------------------------- write/read


def test_write_creates_the_node_layout(
    fs: ContextFS, fs_root: Path, make_node: NodeFactory
) -> None:
    stored = fs.write_node(make_node(URI, "a"))
    d = fs_root / "acme" / "users" / "u1" / "memories" / "profile" / "name"
    assert fs.resolve_path(URI) == d.resolve()
    assert (d / ".abstract.md").read_text() == "abstract a"
    assert (d / ".overview.md").read_text() == "overview a"
    assert (d / "content.md").read_text() == "content a"
    meta = json.loads((d / ".meta.json").read_text())
    assert set(meta) == {
        "uri",
        "category",
        "context_type",
        "owner_space",
        "version",
        "created_at",
        "updated_at",
        "content_hash",
        "source_refs",
        "metadata",
    }
    assert meta["uri"] == URI
    assert meta["owner_space"] == "users/u1"
    assert meta["version"] == 1
    assert meta["category"] == "profile"
    assert meta["context_type"] == "memory"
    assert meta["source_refs"] == ["m-a"]
    assert meta["metadata"] == {"tag": "a"}
    assert meta["content_hash"] == content_hash("abstract a", "overview a", "content a")
    assert meta["created_at"].endswith("Z") and meta["created_at"] == meta["updated_at"]
    assert datetime.fromisoformat(meta["created_at"]).utcoffset().total_seconds() == 0
    assert not (d / ".relations.json").exists()
    # no leftovers of the commit protocol
    assert sorted(p.name for p in d.iterdir()) == [
        ".abstract.md",
        ".history.jsonl",
        ".lock",
        ".meta.json",
        ".overview.md",
        "content.md",
    ]
    assert stored.version == 1
    assert stored.uri == URI
    assert stored.parent_uri == "ctx://acme/users/u1/memories/profile"
    assert stored.owner_space == "users/u1"


def test_read_returns_what_write_returned(fs: ContextFS, make_node: NodeFactory) -> None:
    stored = fs.write_node(make_node(URI, "a", context_type=ContextType.SKILL))
    again = ContextFS(fs.fs_root).read_node(URI)
    assert again == stored
    assert again.context_type is ContextType.SKILL
    assert again.content_hash == again.compute_hash()
    light = fs.read_node(URI, include_content=False)
    assert light.content == "" and light.abstract == "abstract a" and light.version == 1


def test_trailing_slash_names_the_same_node(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI + "/", "a"))
    assert fs.read_node(URI).abstract == "abstract a"
    assert fs.read_node(CtxURI.parse(URI + "/")).uri == URI


def test_owner_space_is_derived_from_the_uri(fs: ContextFS, make_node: NodeFactory) -> None:
    stored = fs.write_node(make_node("ctx://acme/agents/bot/memories/cases/c1", owner_space="x/y"))
    assert stored.owner_space == "agents/bot"
    root_node = fs.write_node(make_node("ctx://acme/skills/"))
    assert root_node.owner_space == "skills"


def test_read_missing_raises(fs: ContextFS) -> None:
    with pytest.raises(NodeNotFoundError, match="no such node"):
        fs.read_node(URI)


def test_plain_directory_is_not_a_node(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI))
    with pytest.raises(NodeNotFoundError):
        fs.read_node("ctx://acme/users/u1/memories")
    assert fs.exists("ctx://acme/users/u1/memories")


def test_versions_increase_and_created_at_is_kept(fs: ContextFS, make_node: NodeFactory) -> None:
    v1 = fs.write_node(make_node(URI, "a"))
    v2 = fs.write_node(make_node(URI, "b"))
    v3 = fs.write_node(make_node(URI, "c"), expected_version=2)
    assert [v1.version, v2.version, v3.version] == [1, 2, 3]
    assert v1.created_at == v2.created_at == v3.created_at
    assert v3.updated_at is not None and v1.updated_at is not None
    assert v3.updated_at >= v2.updated_at >= v1.updated_at
    assert fs.read_node(URI).abstract == "abstract c"


def test_expected_version_zero_means_must_not_exist(fs: ContextFS, make_node: NodeFactory) -> None:
    assert fs.write_node(make_node(URI, "a"), expected_version=0).version == 1
    before = node_files(fs, URI)
    with pytest.raises(VersionConflictError) as info:
        fs.write_node(make_node(URI, "b"), expected_version=0)
    assert (info.value.expected, info.value.actual) == (0, 1)
    assert node_files(fs, URI) == before


def test_stale_expected_version_conflicts_and_writes_nothing(
    fs: ContextFS, make_node: NodeFactory
) -> None:
    fs.write_node(make_node(URI, "a"))
    fs.write_node(make_node(URI, "b"))
    before = node_files(fs, URI)
    with pytest.raises(VersionConflictError, match="expected version 1, found 2"):
        fs.write_node(make_node(URI, "c"), expected_version=1)
    with pytest.raises(VersionConflictError):
        fs.write_node(make_node(URI, "c"), expected_version=7)
    assert node_files(fs, URI) == before
    with pytest.raises(VersionConflictError):
        fs.write_node(make_node("ctx://acme/users/u1/new", "c"), expected_version=1)
    assert not fs.exists("ctx://acme/users/u1/new")


def test_identical_write_is_a_byte_for_byte_no_op(fs: ContextFS, make_node: NodeFactory) -> None:
    first = fs.write_node(make_node(URI, "a"))
    files, mtimes = node_files(fs, URI), node_mtimes(fs, URI)
    again = fs.write_node(make_node(URI, "a"))
    assert again == first
    # also with the expected_version of the first attempt: a redelivered write succeeds
    assert fs.write_node(make_node(URI, "a"), expected_version=0) == first
    assert node_files(fs, URI) == files
    assert node_mtimes(fs, URI) == mtimes


@pytest.mark.parametrize(
    "change",
    [
        {"abstract": "other"},
        {"overview": "other"},
        {"content": "other"},
        {"category": "events"},
        {"source_refs": ["m-a", "m-b"]},
        {"metadata": {"tag": "a", "n": 1}},
        {"context_type": ContextType.SESSION},
    ],
)
def test_any_change_bumps_the_version(
    fs: ContextFS, make_node: NodeFactory, change: dict[str, object]
) -> None:
    fs.write_node(make_node(URI, "a"))
    assert fs.write_node(make_node(URI, "a", **change)).version == 2


def test_metadata_must_be_json(fs: ContextFS, make_node: NodeFactory) -> None:
    with pytest.raises(ValueError):
        fs.write_node(make_node(URI, metadata={"x": object()}))
    assert not fs.exists(URI)


def test_metadata_is_stored_as_json(fs: ContextFS, make_node: NodeFactory) -> None:
    stored = fs.write_node(make_node(URI, metadata={"stats": {"calls": 3}, "tags": ("a", "b")}))
    assert stored.metadata == {"stats": {"calls": 3}, "tags": ["a", "b"]}
    # a tuple and a list are the same JSON: no new version
    again = fs.write_node(make_node(URI, metadata={"stats": {"calls": 3}, "tags": ["a", "b"]}))
    assert again.version == 1


def test_write_level(fs: ContextFS) -> None:
    created = fs.write_level(URI, 0, "only an abstract", expected_version=0)
    assert created.version == 1 and created.abstract == "only an abstract"
    assert created.overview == "" and created.content == ""
    v2 = fs.write_level(URI, 2, "the content", expected_version=1)
    v3 = fs.write_level(URI, 1, "the overview")
    assert (v2.version, v3.version) == (2, 3)
    node = fs.read_node(URI)
    assert (node.abstract, node.overview, node.content) == (
        "only an abstract",
        "the overview",
        "the content",
    )
    assert node.content_hash == content_hash("only an abstract", "the overview", "the content")
    assert fs.write_level(URI, 1, "the overview").version == 3  # unchanged: no-op
    with pytest.raises(VersionConflictError):
        fs.write_level(URI, 0, "x", expected_version=1)
    with pytest.raises(ValueError, match="level must be"):
        fs.write_level(URI, 3, "x")


def test_write_metadata(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "a", metadata={"old": True, "calls": 1}))
    v2 = fs.write_metadata(URI, {"calls": 2})
    assert v2.version == 2
    assert v2.metadata == {"calls": 2}  # replaced, not merged
    assert v2.abstract == "abstract a" and v2.content == "content a"
    assert fs.write_metadata(URI, {"calls": 2}).version == 2
    with pytest.raises(VersionConflictError):
        fs.write_metadata(URI, {"calls": 3}, expected_version=1)
    with pytest.raises(NodeNotFoundError):
        fs.write_metadata("ctx://acme/users/u1/missing", {"a": 1})
    assert not fs.exists("ctx://acme/users/u1/missing")


def test_reserved_and_conflicting_names(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI))
    with pytest.raises(InvalidURIError, match="reserved"):
        fs.write_node(make_node(URI + "/content.md"))
    (fs.resolve_path("ctx://acme/resources/doc.txt").parent).mkdir(parents=True)
    fs.resolve_path("ctx://acme/resources/doc.txt").write_text("raw")
    with pytest.raises(StorageError, match="is a file"):
        fs.write_node(make_node("ctx://acme/resources/doc.txt"))
    with pytest.raises(StorageError, match="cannot create"):
        fs.write_node(make_node("ctx://acme/resources/doc.txt/child"))


def test_corrupt_meta_is_a_clear_error(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI))
    (fs.resolve_path(URI) / ".meta.json").write_text("{not json")
    with pytest.raises(StorageError, match="corrupt .meta.json"):
        fs.read_node(URI)


# ---------------------------------------------------------------------------- tenancy


def test_tenancy_is_enforced_with_a_context(
    fs: ContextFS, make_node: NodeFactory, acme_ctx: RequestContext
) -> None:
    other = RequestContext(account_id="globex", user_id="u1", session_id="s1")
    fs.write_node(make_node(URI), ctx=acme_ctx)
    assert fs.read_node(URI, ctx=acme_ctx).version == 1
    calls: list[Callable[[], object]] = [
        lambda: fs.read_node(URI, ctx=other),
        lambda: fs.write_node(make_node(URI, "b"), ctx=other),
        lambda: fs.write_level(URI, 0, "x", ctx=other),
        lambda: fs.write_metadata(URI, {}, ctx=other),
        lambda: fs.stat_node(URI, ctx=other),
        lambda: fs.exists(URI, ctx=other),
        lambda: fs.list_children("ctx://acme/users/", ctx=other),
        lambda: fs.delete(URI, ctx=other),
        lambda: fs.glob("**", "ctx://acme/users/", ctx=other),
        lambda: fs.abstract(URI, ctx=other),
        lambda: fs.overview(URI, ctx=other),
        lambda: fs.resolve_path(URI, ctx=other),
        lambda: list(fs.walk_nodes("ctx://acme/users/", ctx=other)),
    ]
    for call in calls:
        with pytest.raises(TenancyError, match="outside account 'globex'"):
            call()
    assert fs.read_node(URI).abstract == "abstract a"


# ---------------------------------------------------------------------------- stat/exists


def test_stat_node(fs: ContextFS, make_node: NodeFactory) -> None:
    stored = fs.write_node(make_node(URI, "a"))
    st = fs.stat_node(URI)
    assert st.exists and st.version == 1
    assert st.content_hash == stored.content_hash
    assert st.category == "profile"
    assert st.updated_at == stored.updated_at
    files = node_files(fs, URI)
    assert st.size == sum(len(b) for name, b in files.items() if name != ".history.jsonl")
    missing = fs.stat_node("ctx://acme/users/u1/none")
    assert not missing.exists and missing.version == 0 and missing.size == 0


def test_stat_of_a_regular_file(fs: ContextFS) -> None:
    p = fs.resolve_path("ctx://acme/resources/docs/readme.md")
    p.parent.mkdir(parents=True)
    p.write_text("hello")
    st = fs.stat_node("ctx://acme/resources/docs/readme.md")
    assert st.exists and st.size == 5 and st.version == 0


def test_exists(fs: ContextFS, make_node: NodeFactory) -> None:
    assert not fs.exists(URI)
    fs.write_node(make_node(URI))
    assert fs.exists(URI) and fs.exists(URI + "/")
    assert fs.exists("ctx://acme/users/u1/")  # a directory with children
    empty = fs.resolve_path("ctx://acme/users/empty")
    empty.mkdir()
    assert not fs.exists("ctx://acme/users/empty")
    (empty / ".lock").touch()  # what an interrupted first write leaves behind
    assert not fs.exists("ctx://acme/users/empty")
    assert not fs.stat_node("ctx://acme/users/empty").exists
