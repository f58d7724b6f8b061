"""Reading and encoding one node directory: ``.meta.json`` model, loading, stat, file bytes.

Callers hold the node lock; nothing here locks or writes.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ctxpipe.core.enums import ContextType
from ctxpipe.core.errors import StorageError
from ctxpipe.core.models import ContextNode, NodeStat, NodeSummary
from ctxpipe.core.uri import CtxURI, node_uri
from ctxpipe.fs import listing
from ctxpipe.fs.atomic import (
    ABSTRACT_FILE,
    CONTENT_FILE,
    META_FILE,
    NODE_FILES,
    OVERVIEW_FILE,
)

LEVEL_FIELDS = ("abstract", "overview", "content")


class NodeMeta(BaseModel):
    """The content of ``.meta.json``."""

    uri: str
    category: str = ""
    context_type: ContextType = ContextType.MEMORY
    owner_space: str = ""
    version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    content_hash: str = ""
    source_refs: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def to_bytes(self) -> bytes:
        data = self.model_dump(mode="json")
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def owner_space_of(uri: CtxURI) -> str:
    """``users/u1`` for ``ctx://acme/users/u1/…``: the scope plus the first segment."""
    return "/".join((uri.scope, *uri.segments[:1]))


def check_level(level: int) -> str:
    """The `ContextNode` field of a level (0=L0 abstract, 1=L1 overview, 2=L2 content)."""
    if level not in (0, 1, 2):
        raise ValueError(f"level must be 0 (L0), 1 (L1) or 2 (L2), not {level!r}")
    return LEVEL_FIELDS[level]


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def is_node_dir(path: Path) -> bool:
    return (path / META_FILE).is_file()


def same_content(a: ContextNode, b: ContextNode) -> bool:
    """Whether writing ``b`` over ``a`` would change nothing a reader can see."""
    return (
        a.abstract == b.abstract
        and a.overview == b.overview
        and a.content == b.content
        and a.category == b.category
        and a.context_type == b.context_type
        and list(a.source_refs) == list(b.source_refs)
        and a.metadata == b.metadata
    )


def load_node(path: Path, u: CtxURI, include_content: bool = True) -> ContextNode | None:
    """The node stored in ``path`` (None when it has no ``.meta.json``)."""
    try:
        raw = (path / META_FILE).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        meta = NodeMeta.model_validate_json(raw)
    except ValidationError as exc:
        raise StorageError(f"corrupt {META_FILE} of {node_uri(u)}: {exc}") from exc
    return ContextNode(
        uri=node_uri(u),
        parent_uri=node_uri(u.parent),
        context_type=meta.context_type,
        category=meta.category,
        owner_space=meta.owner_space,
        abstract=read_text(path / ABSTRACT_FILE),
        overview=read_text(path / OVERVIEW_FILE),
        content=read_text(path / CONTENT_FILE) if include_content else "",
        metadata=meta.metadata,
        source_refs=meta.source_refs,
        version=meta.version,
        content_hash=meta.content_hash,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
    )


def stat_dir(path: Path, u: CtxURI) -> NodeStat:
    """`NodeStat` of a directory; ``size`` is the total of the node's own files."""
    size = 0
    for name in NODE_FILES:
        with contextlib.suppress(FileNotFoundError):
            size += (path / name).stat().st_size
    node = load_node(path, u, include_content=False)
    if node is None:
        return NodeStat(uri=node_uri(u), exists=listing.has_children(path), size=size)
    return NodeStat(
        uri=node.uri,
        exists=True,
        version=node.version,
        size=size,
        content_hash=node.content_hash,
        category=node.category,
        updated_at=node.updated_at,
    )


def summarize_dir(path: Path, u: CtxURI, level: int) -> NodeSummary:
    node = load_node(path, u, include_content=False)
    return NodeSummary(
        uri=node_uri(u),
        name=u.name,
        is_dir=True,
        has_children=listing.has_children(path),
        category=node.category if node else "",
        abstract=listing.first_line(read_text(path / ABSTRACT_FILE)),
        version=node.version if node else 0,
        depth=level,
        updated_at=node.updated_at if node else None,
    )


def encode_files(node: ContextNode, meta: NodeMeta) -> dict[str, bytes]:
    """The files a node write commits (``.relations.json`` is not part of it)."""
    return {
        ABSTRACT_FILE: node.abstract.encode("utf-8"),
        OVERVIEW_FILE: node.overview.encode("utf-8"),
        CONTENT_FILE: node.content.encode("utf-8"),
        META_FILE: meta.to_bytes(),
    }
