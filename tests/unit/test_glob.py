"""ContextFS.glob: real ``**`` semantics through wcmatch, never hidden files, never outside."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxpipe.core.errors import TenancyError
from ctxpipe.core.models import ContextNode
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS

NodeFactory = Callable[..., ContextNode]
BASE = "ctx://acme/users/u1/"
NODES = (
    "memories/profile",
    "memories/preferences/tea",
    "memories/preferences/coffee",
    "memories/entities/alpha",
    "memories/entities/alpha/notes",
    "memories/events/2026/launch",
)


@pytest.fixture
def tree(fs: ContextFS, make_node: NodeFactory) -> ContextFS:
    for rel in NODES:
        fs.write_node(make_node(BASE + rel))
    docs = fs.resolve_path(BASE + "docs")
    docs.mkdir()
    (docs / "guide.md").write_text("guide")
    (docs / "todo.txt").write_text("todo")
    (docs / ".secret.md").write_text("hidden")
    return fs


def rel(uris: list[str]) -> list[str]:
    return [u.removeprefix(BASE) for u in uris]


def test_globstar_matches_every_depth(tree: ContextFS) -> None:
    got = rel(tree.glob("**", BASE))
    assert got == sorted(
        [
            "docs",
            "docs/guide.md",
            "docs/todo.txt",
            "memories",
            "memories/entities",
            "memories/entities/alpha",
            "memories/entities/alpha/notes",
            "memories/events",
            "memories/events/2026",
            "memories/events/2026/launch",
            "memories/preferences",
            "memories/preferences/coffee",
            "memories/preferences/tea",
            "memories/profile",
        ]
    )


def test_globstar_in_the_middle(tree: ContextFS) -> None:
    assert rel(tree.glob("memories/**/alpha", BASE)) == ["memories/entities/alpha"]
    # ** matches zero directories too
    assert rel(tree.glob("**/profile", BASE)) == ["memories/profile"]
    assert rel(tree.glob("memories/**/launch", BASE)) == ["memories/events/2026/launch"]


def test_single_star_stays_in_one_directory(tree: ContextFS) -> None:
    assert rel(tree.glob("memories/*", BASE)) == [
        "memories/entities",
        "memories/events",
        "memories/preferences",
        "memories/profile",
    ]
    assert rel(tree.glob("*/tea", BASE)) == []
    assert rel(tree.glob("memories/preferences/*", BASE)) == [
        "memories/preferences/coffee",
        "memories/preferences/tea",
    ]


def test_braces_classes_and_extglob(tree: ContextFS) -> None:
    assert rel(tree.glob("memories/preferences/{tea,milk}", BASE)) == ["memories/preferences/tea"]
    assert rel(tree.glob("memories/preferences/[ct]*", BASE)) == [
        "memories/preferences/coffee",
        "memories/preferences/tea",
    ]
    assert rel(tree.glob("memories/!(preferences|entities)", BASE)) == [
        "memories/events",
        "memories/profile",
    ]


def test_files_and_trailing_slash(tree: ContextFS) -> None:
    assert rel(tree.glob("**/*.md", BASE)) == ["docs/guide.md"]  # no content.md, no hidden
    assert rel(tree.glob("docs/*", BASE)) == ["docs/guide.md", "docs/todo.txt"]
    assert "docs/guide.md" not in rel(tree.glob("docs/**/", BASE))


def test_hidden_files_are_never_matched(tree: ContextFS) -> None:
    for pattern in (
        ".*",
        "**/.*",
        "**/.meta.json",
        "memories/profile/.abstract.md",
        "docs/.secret.md",
        "**/.lock",
        "**/content.md",
    ):
        assert tree.glob(pattern, BASE) == [], pattern


def test_base_uri_scopes_the_search(tree: ContextFS) -> None:
    assert tree.glob("*", BASE + "memories/preferences") == [
        BASE + "memories/preferences/coffee",
        BASE + "memories/preferences/tea",
    ]
    assert tree.glob("**", "ctx://acme/users/nobody/") == []
    assert tree.glob("./memories/profile", BASE) == [BASE + "memories/profile"]


@pytest.mark.parametrize("pattern", ["", "../*", "memories/../../*", "/etc/*", "a/../b", "x\x00"])
def test_escaping_patterns_are_rejected(tree: ContextFS, pattern: str) -> None:
    with pytest.raises(ValueError, match="invalid glob pattern"):
        tree.glob(pattern, BASE)


def test_symlinks_are_not_followed(tree: ContextFS, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "loot").mkdir(parents=True)
    (outside / "loot" / "x.md").write_text("x")
    tree.resolve_path(BASE + "memories/link").symlink_to(outside)
    everything = tree.glob("**", BASE)
    assert not any("link" in u or "loot" in u for u in everything)
    assert tree.glob("memories/link/*", BASE) == []
    assert tree.glob("memories/link/**/*.md", BASE) == []


def test_glob_is_case_sensitive_and_results_are_uris(tree: ContextFS) -> None:
    assert tree.glob("MEMORIES/*", BASE) == []
    for uri in tree.glob("**", BASE):
        assert uri.startswith(BASE) and not uri.endswith("/")


def test_glob_tenancy(tree: ContextFS) -> None:
    mine = RequestContext(account_id="acme", user_id="u1", session_id="s")
    assert tree.glob("memories/profile", BASE, ctx=mine) == [BASE + "memories/profile"]
    with pytest.raises(TenancyError):
        tree.glob("**", BASE, ctx=RequestContext(account_id="x", user_id="u1", session_id="s"))
