"""A cheap walk of every node on the ContextFS: URI, directory and the last change time.

Reads no file: one ``stat`` of ``.meta.json`` (rewritten on every node write) and of
``.relations.json`` (rewritten on every edge change) per node directory. Repair compares only
the nodes changed since its last run in detail; reindex and status use the URI list.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctxpipe.core.uri import node_uri
from ctxpipe.fs import ContextFS
from ctxpipe.fs.atomic import META_FILE, RELATIONS_FILE
from ctxpipe.fs.listing import iter_dirs


@dataclass(frozen=True)
class FSEntry:
    uri: str
    path: Path
    mtime: float  # latest mtime of the node's .meta.json / .relations.json (epoch seconds)


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except (FileNotFoundError, NotADirectoryError):
        return None


def scan_fs(fs: ContextFS) -> Iterator[FSEntry]:
    """Every node under every account/scope root, pre-order, siblings by name."""
    for root in fs.roots():
        for uri, path in iter_dirs(root, fs.resolve_path(root)):
            meta = _mtime(path / META_FILE)
            if meta is None:
                continue  # a plain grouping directory
            rel = _mtime(path / RELATIONS_FILE)
            yield FSEntry(node_uri(uri), path, max(meta, rel or 0.0))


def count_fs_nodes(fs: ContextFS) -> int:
    return sum(1 for _ in scan_fs(fs))


__all__ = ["FSEntry", "count_fs_nodes", "scan_fs"]
