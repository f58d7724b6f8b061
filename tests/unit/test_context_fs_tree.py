"""ContextFS as a tree: listing, delete, L0/L1 lookup of dirs and files, walking."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxpipe.core.errors import (
    InvalidURIError,
    NodeNotFoundError,
    StorageError,
)
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS

NodeFactory = Callable[..., ContextNode]
URI = "ctx://acme/users/u1/memories/profile/name"


# ---------------------------------------------------------------------------- listing


def test_list_children(fs: ContextFS, make_node: NodeFactory) -> None:
    base = "ctx://acme/users/u1/memories/"
    fs.write_node(make_node(base + "preferences/tea", "tea", abstract="Likes tea\nand more"))
    fs.write_node(make_node(base + "preferences/coffee", "coffee"))
    fs.write_node(make_node(base + "profile", "p"))
    fs.write_node(make_node(base + "profile", "p2"))
    (fs.resolve_path(base) / ".hidden").mkdir()
    (fs.resolve_path(base) / "notes.txt").write_text("raw file")
    children = fs.list_children(base)
    assert [c.name for c in children] == ["notes.txt", "preferences", "profile"]
    notes, prefs, profile = children
    assert not notes.is_dir and notes.uri == base + "notes.txt"
    assert prefs.is_dir and prefs.has_children and prefs.version == 0
    assert prefs.uri == "ctx://acme/users/u1/memories/preferences"
    assert profile.version == 2 and profile.abstract == "abstract p2"
    assert profile.category == "profile" and not profile.has_children
    assert profile.updated_at is not None
    prefs_children = fs.list_children(base + "preferences")
    assert [c.name for c in prefs_children] == ["coffee", "tea"]
    assert prefs_children[1].abstract == "Likes tea"  # the first line of L0


def test_list_children_depth_and_recursive(fs: ContextFS, make_node: NodeFactory) -> None:
    for uri in ("a/b/c/d", "a/b/x", "z"):
        fs.write_node(make_node("ctx://acme/users/u1/" + uri))
    one = fs.list_children("ctx://acme/users/u1")
    assert [c.name for c in one] == ["a", "z"]
    two = fs.list_children("ctx://acme/users/u1", depth=2)
    assert [(c.name, c.depth) for c in two] == [("a", 1), ("b", 2), ("z", 1)]
    everything = fs.list_children("ctx://acme/users/u1", recursive=True)
    assert [c.uri.removeprefix("ctx://acme/users/u1/") for c in everything] == [
        "a",
        "a/b",
        "a/b/c",
        "a/b/c/d",
        "a/b/x",
        "z",
    ]
    assert [c.depth for c in everything] == [1, 2, 3, 4, 3, 1]


def test_node_with_children_lists_them_not_its_files(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node("ctx://acme/users/u1/topic"))
    fs.write_node(make_node("ctx://acme/users/u1/topic/sub"))
    children = fs.list_children("ctx://acme/users/u1/topic")
    assert [c.name for c in children] == ["sub"]


def test_list_children_errors(fs: ContextFS, make_node: NodeFactory) -> None:
    with pytest.raises(NodeNotFoundError):
        fs.list_children("ctx://acme/users/nobody/")
    p = fs.resolve_path("ctx://acme/resources/f.txt")
    p.parent.mkdir(parents=True)
    p.write_text("x")
    with pytest.raises(StorageError, match="not a directory"):
        fs.list_children("ctx://acme/resources/f.txt")


def test_listing_skips_symlinks(fs: ContextFS, make_node: NodeFactory, tmp_path: Path) -> None:
    fs.write_node(make_node("ctx://acme/users/u1/real"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    fs.resolve_path("ctx://acme/users/u1/link").symlink_to(outside)
    assert [c.name for c in fs.list_children("ctx://acme/users/u1")] == ["real"]
    assert not fs.exists("ctx://acme/users/u1/link")
    # a path running through the symlink is refused, whatever the operation
    for call in (
        lambda: fs.abstract("ctx://acme/users/u1/link/secret.txt"),
        lambda: fs.read_level("ctx://acme/users/u1/link/secret.txt", 2),
        lambda: fs.write_node(make_node("ctx://acme/users/u1/link/planted")),
        lambda: fs.delete("ctx://acme/users/u1/link/secret.txt"),
    ):
        with pytest.raises(InvalidURIError, match="symbolic link"):
            call()
    assert (outside / "secret.txt").read_text() == "secret"
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]


# ---------------------------------------------------------------------------- delete


def test_delete_leaf_and_missing(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI))
    fs.delete(URI)
    assert not fs.exists(URI)
    assert not fs.resolve_path(URI).exists()
    with pytest.raises(NodeNotFoundError):
        fs.read_node(URI)
    fs.delete(URI)  # missing: no error
    fs.delete("ctx://acme/users/never/was")
    parent = fs.resolve_path(URI).parent
    assert [p.name for p in parent.iterdir()] == []  # no tombstone left behind


def test_delete_non_empty_needs_recursive(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node("ctx://acme/users/u1/topic"))
    fs.write_node(make_node("ctx://acme/users/u1/topic/sub"))
    with pytest.raises(StorageError, match="has children.*recursive=True"):
        fs.delete("ctx://acme/users/u1/topic")
    assert fs.read_node("ctx://acme/users/u1/topic/sub").version == 1
    fs.delete("ctx://acme/users/u1/topic", recursive=True)
    assert not fs.exists("ctx://acme/users/u1/topic")
    assert not fs.resolve_path("ctx://acme/users/u1/topic").exists()


def test_delete_then_write_starts_over(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI, "a"))
    fs.write_node(make_node(URI, "b"))
    fs.delete(URI)
    again = fs.write_node(make_node(URI, "c"), expected_version=0)
    assert again.version == 1


def test_delete_regular_file(fs: ContextFS) -> None:
    p = fs.resolve_path("ctx://acme/resources/docs/a.txt")
    p.parent.mkdir(parents=True)
    p.write_text("x")
    fs.delete("ctx://acme/resources/docs/a.txt")
    assert not p.exists()


# ---------------------------------------------------------------------------- L0 / L1


def test_abstract_and_overview_of_dirs_and_files(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node("ctx://acme/resources/docs", "docs"))
    f = fs.resolve_path("ctx://acme/resources/docs/readme.md")
    f.write_text("# readme")
    assert fs.abstract("ctx://acme/resources/docs/") == "abstract docs"
    assert fs.abstract("ctx://acme/resources/docs") == "abstract docs"
    # a file URI reads its parent directory's L0/L1
    assert fs.abstract("ctx://acme/resources/docs/readme.md") == "abstract docs"
    assert fs.overview("ctx://acme/resources/docs/readme.md") == "overview docs"
    assert fs.read_level("ctx://acme/resources/docs/readme.md", 2) == "# readme"
    assert fs.read_level("ctx://acme/resources/docs", 2) == "content docs"
    assert fs.read_level("ctx://acme/resources/docs", 1) == "overview docs"
    # a plain directory has no L0 yet
    assert fs.abstract("ctx://acme/resources/") == ""
    with pytest.raises(NodeNotFoundError):
        fs.abstract("ctx://acme/resources/missing")
    with pytest.raises(NodeNotFoundError):
        fs.overview("ctx://acme/resources/docs/missing.md")


# ---------------------------------------------------------------------------- walking


def test_walk_nodes_and_roots(fs: ContextFS, make_node: NodeFactory) -> None:
    for uri in ("ctx://acme/users/u1/b", "ctx://acme/users/u1/a/x", "ctx://acme/users/u2/c"):
        fs.write_node(make_node(uri))
    fs.write_node(make_node("ctx://acme/users/u1/b", "again"))
    fs.write_node(make_node("ctx://globex/agents/bot/m"))
    walked = list(fs.walk_nodes("ctx://acme/users/"))
    assert [u for u, _ in walked] == [
        "ctx://acme/users/u1/a/x",
        "ctx://acme/users/u1/b",
        "ctx://acme/users/u2/c",
    ]
    stats = dict(walked)
    assert stats["ctx://acme/users/u1/b"].version == 2
    assert all(s.exists and s.size > 0 and s.content_hash for s in stats.values())
    assert [u for u, _ in fs.walk_nodes("ctx://acme/users/u1/b")] == ["ctx://acme/users/u1/b"]
    assert list(fs.walk_nodes("ctx://acme/skills/")) == []
    assert [str(r) for r in fs.roots()] == ["ctx://acme/users/", "ctx://globex/agents/"]


def test_from_settings(tmp_path: Path) -> None:
    from ctxpipe.core.config import Settings

    s = Settings(fs_root=tmp_path / "x", lock_timeout_s=3.5)
    fs = ContextFS.from_settings(s)
    assert fs.fs_root == (tmp_path / "x").resolve()
    assert fs.lock_timeout_s == 3.5


def test_read_file(fs: ContextFS, make_node: NodeFactory) -> None:
    fs.write_node(make_node(URI))
    assert fs.read_file(URI, ".abstract.md") == b"abstract a"
    assert fs.read_file(URI, ".relations.json") is None
    with pytest.raises(ValueError, match="not a node file"):
        fs.read_file(URI, "../../../etc/passwd")
    with pytest.raises(NodeNotFoundError):
        fs.read_file("ctx://acme/users/none", ".meta.json")
