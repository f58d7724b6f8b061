"""The removal of a node: its history kept as a tombstone (`bury`), its directory set aside
under its exclusive lock and then removed (`remove_dir`). `ContextFS.forget` and
`ContextFS.delete` call them.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ctxpipe.core.errors import StorageError
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import listing
from ctxpipe.fs.atomic import TOMBSTONE_PREFIX, atomic_write_file, fsync_dir, recover
from ctxpipe.fs.history import NodeChange, closed_history, tombstone_path
from ctxpipe.fs.locks import NodeLocks


def bury(path: Path, nid: str, current: ContextNode, change: NodeChange) -> None:
    """Write the history of the node at `path`, closed by `change`, as its tombstone beside
    it. The caller holds the node's exclusive lock."""
    grave = tombstone_path(path)
    grave.parent.mkdir(exist_ok=True)
    atomic_write_file(grave, closed_history(path, nid, current, change))


def remove_dir(locks: NodeLocks, path: Path, nid: str, *, recursive: bool) -> None:
    """Remove the directory `path` (of the node `nid`): renamed aside under its exclusive lock
    (after recovery), so no reader sees half of it, then removed. A directory with children
    needs ``recursive`` (else `StorageError`); one deleted concurrently is no error."""
    tomb = path.parent / f"{TOMBSTONE_PREFIX}{path.name}-{secrets.token_hex(6)}"
    try:
        with locks.hold(path, exclusive=True):
            recover(path)
            if not recursive and listing.has_children(path):
                raise StorageError(f"{nid} has children; delete them first or use recursive=True")
            os.rename(path, tomb)
            fsync_dir(path.parent)
    except FileNotFoundError:
        if path.exists():
            raise
        return  # deleted concurrently
    listing.remove_tree(tomb)
