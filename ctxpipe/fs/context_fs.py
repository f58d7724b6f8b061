"""ContextFS: the primary store. A node is a directory under ``{fs_root}/{account}/{scope}/…``.

Node files: ``.abstract.md`` (L0), ``.overview.md`` (L1), ``content.md`` (L2), ``.meta.json``
(uri, category, context_type, owner_space, version, timestamps, content_hash, source_refs, free
metadata) and ``.relations.json`` (see `FSRelationStore`). A directory is a *node* once it has
a ``.meta.json``; plain directories (e.g. ``ctx://acme/users/u1/memories/``) only group nodes.

Writes are versioned (optimistic ``expected_version``), serialised per node (``{node}/.lock``)
and atomic (see `ctxpipe.fs.atomic`). A write that changes nothing is a no-op, so re-running a
commit leaves every byte as it was. Every method takes an optional `RequestContext`; when given,
the URI must belong to its account.

`ContextFS` resolves URIs, takes the node locks and delegates what runs under them to the modules
beside it: `fs.versioned_write` (a node's versioned write), `fs.node_restore` (a node's files
byte for byte, for export and import), `fs.node_removal` (tombstones, deletion), `fs.node_io`
(reading a node's files) and `fs.listing` (walks and globs).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpipe.core.errors import InvalidURIError, NodeNotFoundError, StorageError, TenancyError
from ctxpipe.core.models import ContextNode, NodeStat, NodeSummary
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import SCOPES, CtxURI, node_uri, parse_uri
from ctxpipe.fs import listing, node_restore
from ctxpipe.fs.atomic import ABSTRACT_FILE, CONTENT_FILE, NODE_FILES, OVERVIEW_FILE, recover
from ctxpipe.fs.history import HistoryEntry, NodeChange, read_history, tombstone_path
from ctxpipe.fs.locks import NodeLocks
from ctxpipe.fs.node_io import (
    NodeMeta,
    check_level,
    is_node_dir,
    load_node,
    owner_space_of,
    read_text,
    stat_dir,
    summarize_dir,
)
from ctxpipe.fs.node_removal import bury, remove_dir
from ctxpipe.fs.node_restore import RESTORE_FILES, RestoreOutcome
from ctxpipe.fs.versioned_write import NodeBuild, write_versioned

if TYPE_CHECKING:  # only a type here: importing the settings loads pydantic-settings
    from ctxpipe.core.config import Settings

UriLike = str | CtxURI
RESERVED_NAMES = frozenset({CONTENT_FILE})


class ContextFS:
    """The filesystem primary store (sync API; every call is blocking file I/O)."""

    def __init__(self, fs_root: Path | str, *, lock_timeout_s: float = 30.0) -> None:
        self.fs_root = Path(fs_root).resolve()
        self.lock_timeout_s = lock_timeout_s
        self._locks = NodeLocks(self.fs_root, lock_timeout_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> ContextFS:
        return cls(settings.fs_root, lock_timeout_s=settings.lock_timeout_s)

    # ------------------------------------------------------------------ URIs and paths
    def parse(self, uri: UriLike, ctx: RequestContext | None = None) -> CtxURI:
        """Validate ``uri`` and, when ``ctx`` is given, that it belongs to ``ctx``'s account."""
        u = parse_uri(uri)
        if ctx is not None and u.account != ctx.account_id:
            raise TenancyError(str(u), ctx.account_id)
        return u

    def resolve_path(self, uri: UriLike, ctx: RequestContext | None = None) -> Path:
        return self._path(self.parse(uri, ctx))

    def _path(self, u: CtxURI) -> Path:
        """``u``'s path; refuses a path that runs through a symlink (it could lead outside)."""
        path = u.to_path(self.fs_root)
        parent = path.parent  # the last component itself may be a symlink; callers skip those
        if os.path.realpath(parent) != str(parent):
            raise InvalidURIError(str(u), "path runs through a symbolic link")
        return path

    def _node_dir(self, u: CtxURI) -> Path:
        if u.segments and u.segments[-1] in RESERVED_NAMES:
            raise InvalidURIError(str(u), f"{u.segments[-1]!r} is reserved for node files")
        return self._path(u)

    @staticmethod
    def is_node_dir(path: Path) -> bool:
        return is_node_dir(path)

    # ------------------------------------------------------------------ locking
    @contextlib.contextmanager
    def locked(self, uri: UriLike, ctx: RequestContext | None = None) -> Iterator[Path]:
        """Hold an existing node's exclusive lock (after recovery); yields its directory."""
        u = self.parse(uri, ctx)
        path = self._node_dir(u)
        if not self.is_node_dir(path):
            raise NodeNotFoundError(node_uri(u))
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self._locks.hold(path, exclusive=True))
            except FileNotFoundError as exc:  # the node was deleted while we waited
                raise NodeNotFoundError(node_uri(u)) from exc
            recover(path)
            if not self.is_node_dir(path):
                raise NodeNotFoundError(node_uri(u))
            yield path

    def read_file(self, uri: UriLike, name: str, ctx: RequestContext | None = None) -> bytes | None:
        """One file of an existing node, read under its shared lock (None when absent)."""
        if name not in NODE_FILES:
            raise ValueError(f"{name!r} is not a node file (one of {', '.join(NODE_FILES)})")
        u = self.parse(uri, ctx)
        path = self._node_dir(u)

        def read() -> bytes | None:
            if not self.is_node_dir(path):
                raise NodeNotFoundError(node_uri(u))
            try:
                return (path / name).read_bytes()
            except FileNotFoundError:
                return None

        return self._locks.read(path, read)

    # ------------------------------------------------------------------ reading
    def exists(self, uri: UriLike, ctx: RequestContext | None = None) -> bool:
        """A regular file, a node, or a directory with visible entries."""
        path = self.resolve_path(uri, ctx)
        if path.is_symlink():
            return False
        if path.is_file():
            return True
        return path.is_dir() and (self.is_node_dir(path) or listing.has_children(path))

    def read_node(
        self, uri: UriLike, include_content: bool = True, ctx: RequestContext | None = None
    ) -> ContextNode:
        u = self.parse(uri, ctx)
        path = self._node_dir(u)
        node = self._locks.read(path, lambda: load_node(path, u, include_content))
        if node is None:
            raise NodeNotFoundError(node_uri(u))
        return node

    def stat_node(self, uri: UriLike, ctx: RequestContext | None = None) -> NodeStat:
        u = self.parse(uri, ctx)
        path = self._path(u)
        if path.is_symlink() or not path.exists():
            return NodeStat(uri=node_uri(u), exists=False)
        if path.is_file():
            return NodeStat(uri=str(u), exists=True, size=path.stat().st_size)
        return self._locks.read(path, lambda: stat_dir(path, u))

    def _level_dir(self, u: CtxURI) -> Path:
        """The directory whose L0/L1 describe ``u``: itself, or for a regular file its parent."""
        path = self._path(u)
        if path.is_symlink():
            raise NodeNotFoundError(str(u))
        if path.is_file():
            return path.parent
        if path.is_dir():
            return path
        raise NodeNotFoundError(str(u))

    def abstract(self, uri: UriLike, ctx: RequestContext | None = None) -> str:
        """L0 of a directory; for a file URI, of its parent directory ("" when unset)."""
        path = self._level_dir(self.parse(uri, ctx))
        return self._locks.read(path, lambda: read_text(path / ABSTRACT_FILE))

    def overview(self, uri: UriLike, ctx: RequestContext | None = None) -> str:
        """L1 of a directory; for a file URI, of its parent directory ("" when unset)."""
        path = self._level_dir(self.parse(uri, ctx))
        return self._locks.read(path, lambda: read_text(path / OVERVIEW_FILE))

    def read_level(self, uri: UriLike, level: int, ctx: RequestContext | None = None) -> str:
        """L0/L1 as `abstract`/`overview`; L2 is the node's content, or a regular file's text."""
        check_level(level)
        if level == 0:
            return self.abstract(uri, ctx)
        if level == 1:
            return self.overview(uri, ctx)
        u = self.parse(uri, ctx)
        path = self._path(u)
        if path.is_file() and not path.is_symlink():
            return path.read_text(encoding="utf-8", errors="replace")
        return self.read_node(u).content

    # ------------------------------------------------------------------ writing
    def _mutate(
        self,
        uri: UriLike,
        ctx: RequestContext | None,
        build: NodeBuild,
        expected_version: int | None,
        change: NodeChange | None = None,
    ) -> ContextNode:
        """Write the node `build` makes under the node's exclusive lock (`write_versioned`)."""
        u = self.parse(uri, ctx)
        path = self._node_dir(u)
        nid = node_uri(u)
        if path.is_file() or path.is_symlink():
            raise StorageError(f"{nid} is a file, not a node directory")
        for attempt in range(3):
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create node directory for {nid}: {exc}") from exc
            with contextlib.ExitStack() as stack:
                try:
                    stack.enter_context(self._locks.hold(path, exclusive=True))
                except FileNotFoundError:
                    if attempt == 2:
                        raise
                    continue  # the directory was deleted while we waited: create it again
                return write_versioned(path, u, nid, build, expected_version, change)
        raise AssertionError("unreachable")

    def write_node(
        self,
        node: ContextNode,
        expected_version: int | None = None,
        ctx: RequestContext | None = None,
        change: NodeChange | None = None,
    ) -> ContextNode:
        """Store ``node`` at ``node.uri``; returns the stored node with its new version.

        ``expected_version``: None = no check, 0 = must not exist yet, N = stored version must
        be N (else `VersionConflictError`, nothing written). A write identical to the stored
        node (levels, category, context_type, source_refs, metadata) is a no-op returning the
        stored node — also when ``expected_version`` is stale, so redelivered writes succeed.
        ``change``: why (action, commit, source messages), recorded in the node's history.
        """
        return self._mutate(node.uri, ctx, lambda _cur, _nid: node, expected_version, change)

    def read_files(
        self, uri: UriLike, names: Iterable[str], ctx: RequestContext | None = None
    ) -> dict[str, bytes | None]:
        """Several files of an existing node (`NODE_FILES`, ``.history.jsonl``) read under one
        shared lock, so they belong to one version (None for a file the node lacks)."""
        wanted = list(names)
        node_restore.check_names(wanted)
        u = self.parse(uri, ctx)
        path = self._node_dir(u)

        def read() -> dict[str, bytes | None]:
            if not self.is_node_dir(path):
                raise NodeNotFoundError(node_uri(u))
            return node_restore.read_files(path, wanted)

        return self._locks.read(path, read)

    def restore_files(
        self,
        uri: UriLike,
        version: int,
        files: Mapping[str, bytes],
        *,
        replace: bool = False,
        ctx: RequestContext | None = None,
    ) -> RestoreOutcome:
        """Write a node's files exactly as given (the import of an export), in one atomic
        commit under the node's exclusive lock: ``.meta.json`` and the levels, with the
        ``.history.jsonl`` and ``.relations.json`` the node had (a file left out of `files` is
        one the node has not). ``unchanged`` when the node already holds those bytes (nothing
        is touched); ``conflict`` when it holds other ones and not `replace` (nothing is
        written); else ``written``. The caller serialises writers (owner lock)."""
        node_restore.check_restore(files)
        u = self.parse(uri, ctx)
        path = self._node_dir(u)
        if path.is_file() or path.is_symlink():
            raise StorageError(f"{node_uri(u)} is a file, not a node directory")
        path.mkdir(parents=True, exist_ok=True)
        with self._locks.hold(path, exclusive=True):
            recover(path)
            return node_restore.restore_locked(path, version, files, replace=replace)

    def history(self, uri: UriLike, ctx: RequestContext | None = None) -> list[HistoryEntry]:
        """Every recorded change of a node, oldest first; of a removed node, its tombstone
        (`NodeNotFoundError` when there is neither)."""
        u = self.parse(uri, ctx)
        path = self._node_dir(u)
        if not self.is_node_dir(path) and not tombstone_path(path).is_file():
            raise NodeNotFoundError(node_uri(u))
        return read_history(path)

    def forget(self, uri: UriLike, change: NodeChange, ctx: RequestContext | None = None) -> None:
        """Remove a node (not its children), keeping its history closed by `change` as a
        tombstone beside it. The caller serialises writers (owner lock)."""
        u = self.parse(uri, ctx)
        path = self._node_dir(u)
        with self._locks.hold(path, exclusive=True):
            recover(path)
            current = load_node(path, u)
            if current is None:
                raise NodeNotFoundError(node_uri(u))
            bury(path, node_uri(u), current, change)
        self.delete(u, recursive=False, ctx=ctx)

    def write_level(
        self,
        uri: UriLike,
        level: int,
        text: str,
        expected_version: int | None = None,
        ctx: RequestContext | None = None,
    ) -> ContextNode:
        """Replace one level (0=L0, 1=L1, 2=L2); creates the node when it does not exist."""
        field_name = check_level(level)

        def build(cur: ContextNode | None, nid: str) -> ContextNode:
            base = cur if cur is not None else ContextNode(uri=nid)
            return base.model_copy(update={field_name: text})

        return self._mutate(uri, ctx, build, expected_version)

    def write_metadata(
        self,
        uri: UriLike,
        metadata: dict[str, Any],
        expected_version: int | None = None,
        ctx: RequestContext | None = None,
    ) -> ContextNode:
        """Replace the node's free metadata (bumps the version when it changes)."""

        def build(cur: ContextNode | None, nid: str) -> ContextNode:
            if cur is None:
                raise NodeNotFoundError(nid)
            return cur.model_copy(update={"metadata": dict(metadata)})

        return self._mutate(uri, ctx, build, expected_version)

    def delete(
        self, uri: UriLike, recursive: bool = False, ctx: RequestContext | None = None
    ) -> None:
        """Delete a node (or a regular file). Missing: no error. Children need ``recursive``."""
        u = self.parse(uri, ctx)
        path = self._path(u)
        if path.is_symlink() or path.is_file():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return
        if path.is_dir():
            remove_dir(self._locks, path, node_uri(u), recursive=recursive)

    # ------------------------------------------------------------------ listing
    def list_children(
        self,
        uri: UriLike,
        recursive: bool = False,
        depth: int = 1,
        ctx: RequestContext | None = None,
    ) -> list[NodeSummary]:
        """Entries below ``uri``, siblings sorted by name, hidden entries skipped.

        ``depth`` levels (1 = direct children); ``recursive=True`` walks the whole subtree.
        """
        u = self.parse(uri, ctx)
        path = self._path(u)
        if path.is_symlink() or not path.exists():
            raise NodeNotFoundError(str(u))
        if not path.is_dir():
            raise StorageError(f"{u} is a file, not a directory")
        max_depth = None if recursive else max(depth, 1)
        return listing.list_tree(self.summarize, u.as_dir(), path, max_depth)

    def summarize(self, u: CtxURI, path: Path, level: int) -> NodeSummary:
        """The `NodeSummary` of one directory or file (used by listings)."""
        if not path.is_dir():
            return NodeSummary(uri=str(u), name=u.name, is_dir=False, depth=level)

        return self._locks.read(path, lambda: summarize_dir(path, u, level))

    def glob(self, pattern: str, base_uri: UriLike, ctx: RequestContext | None = None) -> list[str]:
        """URIs under ``base_uri`` matching ``pattern`` (wcmatch, real ``**``; no hidden files)."""
        u = self.parse(base_uri, ctx)
        return listing.glob_uris(u.as_dir(), self._path(u), pattern)

    def roots(self) -> list[CtxURI]:
        """The scope roots (``ctx://{account}/{scope}/``) present on disk, sorted."""
        found: list[CtxURI] = []
        for acct in listing.sorted_dirs(self.fs_root):
            for scope in listing.sorted_dirs(acct):
                if scope.name not in SCOPES:
                    continue
                with contextlib.suppress(InvalidURIError):
                    found.append(CtxURI.root(acct.name, scope.name))
        return found

    def walk_nodes(
        self, base_uri: UriLike, ctx: RequestContext | None = None
    ) -> Iterator[tuple[str, NodeStat]]:
        """Every node at or below ``base_uri`` (pre-order, siblings by name) with its stat."""
        u = self.parse(base_uri, ctx)
        for child_uri, child_path in listing.iter_dirs(u.as_dir(), self._path(u)):
            if self.is_node_dir(child_path):
                stat = self._locks.read(child_path, partial(stat_dir, child_path, child_uri))
                yield node_uri(child_uri), stat


__all__ = [
    "RESTORE_FILES",
    "ContextFS",
    "NodeMeta",
    "RestoreOutcome",
    "UriLike",
    "owner_space_of",
]
