"""The history of a node: one JSON line per change, in ``.history.jsonl`` next to the node.

It is written in the same atomic commit as the node files (so a node's history can never miss a
version or hold one that was not written): every change — create, merge, append, update — adds
an entry with the new version, what caused it (the commit id and the source messages it added,
the action and reason) and what changed (a unified diff per level, capped in size).
"""

from __future__ import annotations

import difflib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ctxpipe.core.errors import StorageError
from ctxpipe.core.models import ContextNode, utcnow

HISTORY_FILE = ".history.jsonl"
GRAVEYARD_DIR = ".forgotten"  # beside removed nodes: their closed histories (tombstones)
LEVEL_NAMES = ("abstract", "overview", "content")  # L0, L1, L2
MAX_DIFF_CHARS = 20_000  # per level and entry; longer diffs are cut and say so


class NodeChange(BaseModel):
    """Why a write happens (given by the writer; recorded with the new version)."""

    action: str = "update"  # create | merge | append | update | supersede | forget | delete
    commit_id: str = ""
    source_refs: list[str] = Field(default_factory=list)
    reason: str = ""


class HistoryEntry(BaseModel):
    version: int
    at: datetime
    action: str
    commit_id: str = ""
    source_refs: list[str] = Field(default_factory=list)  # the refs this change added
    reason: str = ""
    content_hash: str = ""
    previous_hash: str = ""
    diff: dict[str, str] = Field(default_factory=dict)  # level name -> unified diff


def level_diff(uri: str, level: str, old: str, new: str) -> str:
    """Unified diff of one level ('' when it did not change)."""
    if old == new:
        return ""
    text = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"{uri} {level} (before)",
            tofile=f"{uri} {level} (after)",
        )
    )
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n… diff cut at {MAX_DIFF_CHARS} characters\n"
    return text


def make_entry(
    uri: str,
    version: int,
    at: datetime,
    before: dict[str, str] | None,
    after: dict[str, str],
    hashes: tuple[str, str],
    refs_before: list[str],
    refs_after: list[str],
    change: NodeChange | None,
) -> HistoryEntry:
    change = change or NodeChange(action="create" if before is None else "update")
    old = before or dict.fromkeys(LEVEL_NAMES, "")
    diffs = {lv: level_diff(uri, lv, old.get(lv, ""), after.get(lv, "")) for lv in LEVEL_NAMES}
    known = set(refs_before)
    return HistoryEntry(
        version=version,
        at=at,
        action=change.action,
        commit_id=change.commit_id,
        source_refs=[r for r in refs_after if r not in known],
        reason=change.reason[:500],
        content_hash=hashes[1],
        previous_hash=hashes[0],
        diff={lv: d for lv, d in diffs.items() if d},
    )


def append_line(existing: bytes | None, entry: HistoryEntry) -> bytes:
    line = entry.model_dump_json().encode("utf-8") + b"\n"
    return (existing or b"") + line


def _levels(node: ContextNode) -> dict[str, str]:
    return {"abstract": node.abstract, "overview": node.overview, "content": node.content}


def next_history(
    node_dir: Path,
    uri: str,
    meta: Any,
    current: ContextNode | None,
    wanted: ContextNode,
    change: NodeChange | None,
) -> bytes:
    """The history file after a write of version ``meta.version`` (``meta``: the new
    `NodeMeta`; caller holds the node's exclusive lock)."""
    try:
        existing: bytes | None = (node_dir / HISTORY_FILE).read_bytes()
    except FileNotFoundError:
        existing = None
    entry = make_entry(
        uri,
        meta.version,
        meta.updated_at,
        None if current is None else _levels(current),
        _levels(wanted),
        (current.content_hash if current is not None else "", meta.content_hash),
        current.source_refs if current is not None else [],
        list(meta.source_refs),
        change,
    )
    return append_line(existing, entry)


def tombstone_path(node_dir: Path) -> Path:
    return node_dir.parent / GRAVEYARD_DIR / f"{node_dir.name}{HISTORY_FILE}"


def closed_history(node_dir: Path, uri: str, node: ContextNode, change: NodeChange) -> bytes:
    """The node's history plus a last entry saying it was removed, and why."""
    try:
        existing: bytes | None = (node_dir / HISTORY_FILE).read_bytes()
    except FileNotFoundError:
        existing = None
    entry = HistoryEntry(
        version=node.version,
        at=utcnow(),
        action=change.action,
        commit_id=change.commit_id,
        reason=change.reason[:500],
        content_hash="",
        previous_hash=node.content_hash,
    )
    return append_line(existing, entry)


def read_history(node_dir: Path) -> list[HistoryEntry]:
    """The entries of a node directory, oldest first (none for a node written before history
    was kept)."""
    try:
        raw = (node_dir / HISTORY_FILE).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        try:  # a removed node: its tombstone
            raw = tombstone_path(node_dir).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return []
    out: list[HistoryEntry] = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(HistoryEntry.model_validate(json.loads(line)))
        except ValueError as exc:
            raise StorageError(f"corrupt {HISTORY_FILE} line {n} in {node_dir}: {exc}") from exc
    return out


__all__ = [
    "HISTORY_FILE",
    "HistoryEntry",
    "NodeChange",
    "GRAVEYARD_DIR",
    "append_line",
    "closed_history",
    "tombstone_path",
    "level_diff",
    "make_entry",
    "next_history",
    "read_history",
]
