"""Directory listings of the ContextFS: children, trees, node walks and glob.

Hidden entries (node files, locks, staging/commit records, tombstones), a node's own
``content.md`` and symlinks are never listed, walked or matched; names that are not valid URI
segments (put there by hand) are skipped rather than surfaced as unusable URIs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from wcmatch import glob as wglob

from ctxpipe.core.errors import InvalidURIError
from ctxpipe.core.models import NodeSummary
from ctxpipe.core.uri import CtxURI, node_uri
from ctxpipe.fs.atomic import CONTENT_FILE

# (uri, directory, depth) → the listing row of that entry (`ContextFS.summarize`)
Summarize = Callable[[CtxURI, Path, int], NodeSummary]

GLOB_FLAGS = wglob.GLOBSTAR | wglob.BRACE | wglob.EXTGLOB | wglob.NODOTDIR
MAX_ABSTRACT_LINE = 200


def is_visible(name: str) -> bool:
    return not name.startswith(".") and name != CONTENT_FILE


def has_children(path: Path) -> bool:
    """True when the directory holds anything besides its own node files."""
    try:
        with os.scandir(path) as it:
            return any(is_visible(e.name) for e in it)
    except (FileNotFoundError, NotADirectoryError):
        return False


def first_line(text: str, limit: int = MAX_ABSTRACT_LINE) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _entries(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as it:
            found = [e for e in it if is_visible(e.name) and not e.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(found, key=lambda e: e.name)


def sorted_dirs(path: Path) -> list[Path]:
    """Visible, non-symlink subdirectories of ``path`` sorted by name."""
    return [Path(e.path) for e in _entries(path) if e.is_dir(follow_symlinks=False)]


def _child(parent: CtxURI, name: str, is_dir: bool) -> CtxURI | None:
    try:
        return parent.join(name + "/" if is_dir else name)
    except InvalidURIError:
        return None


def list_tree(
    summarize: Summarize, base: CtxURI, path: Path, max_depth: int | None
) -> list[NodeSummary]:
    """Pre-order listing below ``base`` down to ``max_depth`` levels (None: everything), each
    entry described by ``summarize``."""
    out: list[NodeSummary] = []

    def visit(uri: CtxURI, dir_path: Path, level: int) -> None:
        for entry in _entries(dir_path):
            is_dir = entry.is_dir(follow_symlinks=False)
            child = _child(uri, entry.name, is_dir)
            if child is None:
                continue
            out.append(summarize(child, Path(entry.path), level))
            if is_dir and (max_depth is None or level < max_depth):
                visit(child, Path(entry.path), level + 1)

    visit(base, path, 1)
    return out


def iter_dirs(base: CtxURI, path: Path) -> Iterator[tuple[CtxURI, Path]]:
    """``base`` and every directory below it, pre-order, siblings sorted by name."""
    if not path.is_dir() or path.is_symlink():
        return
    yield base, path
    for entry in _entries(path):
        if entry.is_dir(follow_symlinks=False):
            child = _child(base, entry.name, True)
            if child is not None:
                yield from iter_dirs(child, Path(entry.path))


def _check_pattern(pattern: str) -> None:
    why = ""
    if not pattern:
        why = "empty pattern"
    elif "\x00" in pattern:
        why = "NUL character"
    elif pattern.startswith("/"):
        why = "absolute patterns are not allowed (patterns are relative to the base URI)"
    elif ".." in pattern.split("/"):
        why = "'..' segments are not allowed"
    if why:
        raise ValueError(f"invalid glob pattern {pattern!r}: {why}")


def glob_uris(base: CtxURI, root: Path, pattern: str) -> list[str]:
    """URIs of nodes/files below ``root`` matching ``pattern`` (relative to ``base``).

    Directories come back as canonical node URIs, regular files as file URIs; hidden entries,
    ``content.md`` and anything reached through a symlink are never returned.
    """
    _check_pattern(pattern)
    if not root.is_dir() or root.is_symlink():
        return []
    real_root = os.path.realpath(root)
    found: set[str] = set()
    for match in wglob.glob(pattern, flags=GLOB_FLAGS, root_dir=str(root)):
        parts = [p for p in match.split("/") if p not in ("", ".")]
        if not parts:
            continue
        rel = "/".join(parts)
        if any(p.startswith(".") for p in parts):
            continue
        full = root.joinpath(*parts)
        if os.path.realpath(full) != os.path.join(real_root, *parts):
            continue  # a symlink somewhere on the way
        is_dir = full.is_dir()
        if not is_dir and (parts[-1] == CONTENT_FILE or not full.is_file()):
            continue
        try:
            uri = base.join(rel + "/" if is_dir else rel)
        except InvalidURIError:
            continue
        found.add(node_uri(uri) if is_dir else str(uri))
    return sorted(found)
