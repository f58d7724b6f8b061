"""The versioned write of one node, its exclusive lock held: the change `build` makes to the
stored node, checked against `expected_version`, committed atomically with its history line.

A write that changes nothing is a no-op (not even ``updated_at`` moves), so re-running a commit
leaves every byte as it was. `ContextFS` takes the lock and calls `write_versioned`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from pydantic_core import to_jsonable_python

from ctxpipe.core.errors import StorageError, VersionConflictError
from ctxpipe.core.models import ContextNode, content_hash, utcnow
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs.atomic import commit_files, fsync_dir, recover
from ctxpipe.fs.history import HISTORY_FILE, NodeChange, next_history
from ctxpipe.fs.node_io import NodeMeta, encode_files, load_node, owner_space_of, same_content

# the node wanted, from the stored one (None: there is none yet) and the node's URI
NodeBuild = Callable[[ContextNode | None, str], ContextNode]


def write_versioned(
    path: Path,
    u: CtxURI,
    nid: str,
    build: NodeBuild,
    expected_version: int | None,
    change: NodeChange | None = None,
) -> ContextNode:
    """Write the node `build` returns at `path` (after recovery) and return it as stored.

    ``expected_version``: None = no check, else the stored version (0: none) must be it, or
    `VersionConflictError` and nothing written; an unchanged node is returned as it is, also
    when ``expected_version`` is stale. The caller holds the node's exclusive lock."""
    recover(path)
    current = load_node(path, u)
    wanted = build(current, nid)
    wanted = wanted.model_copy(update={"metadata": to_jsonable_python(wanted.metadata)})
    if current is not None and same_content(current, wanted):
        return current  # idempotent: nothing changes, not even updated_at
    actual = current.version if current is not None else 0
    if expected_version is not None and expected_version != actual:
        raise VersionConflictError(nid, expected_version, actual)
    now = utcnow()
    meta = NodeMeta(
        uri=nid,
        category=wanted.category,
        context_type=wanted.context_type,
        owner_space=owner_space_of(u),
        version=actual + 1,
        created_at=current.created_at if current is not None else now,
        updated_at=now,
        content_hash=content_hash(wanted.abstract, wanted.overview, wanted.content),
        source_refs=list(wanted.source_refs),
        metadata=wanted.metadata,
    )
    files = encode_files(wanted, meta)
    files[HISTORY_FILE] = next_history(path, nid, meta, current, wanted, change)
    new_dir = current is None
    commit_files(path, meta.version, files)
    if new_dir:
        with contextlib.suppress(OSError):
            fsync_dir(path.parent)
    stored = load_node(path, u)
    if stored is None:  # pragma: no cover - the commit just wrote it
        raise StorageError(f"{nid} vanished right after being written")
    return stored
