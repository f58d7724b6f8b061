"""The export format: one JSON record per line (JSONL), each with its format version.

A node record carries everything the FS holds of a node: its levels (L0 abstract, L1 overview,
L2 content), its ``.meta.json`` (version, dates, content hash, source refs, metadata), its
outgoing relations (``.relations.json``) and its history (``.history.jsonl``). A session
record carries a session's recorded owner (``.owner.json``). `node_files` and `record_of` turn
a record into the bytes of the node's files and back; both ways are exact, so a node exported
and imported is byte for byte the node it was.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from ctxpipe.core.enums import ContextType
from ctxpipe.core.errors import Picklable
from ctxpipe.core.models import content_hash
from ctxpipe.core.uri import CtxURI, node_uri
from ctxpipe.fs.atomic import ABSTRACT_FILE, CONTENT_FILE, META_FILE, OVERVIEW_FILE, RELATIONS_FILE
from ctxpipe.fs.history import HISTORY_FILE, HistoryEntry
from ctxpipe.fs.node_io import NodeMeta, owner_space_of
from ctxpipe.fs.relation_store import RelationsDoc

FORMAT_VERSION = 1
"""The version of the record format; every line carries it as ``format``. A reader refuses a
version it does not know (a newer export needs a newer ctxpipe)."""


class RecordError(Picklable, ValueError):
    """A line of an import file that cannot be imported (nothing is written for the file)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class Levels(BaseModel):
    """L0, L1 and L2 of a node."""

    model_config = ConfigDict(extra="forbid")

    abstract: str = ""
    overview: str = ""
    content: str = ""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = 1  # FORMAT_VERSION
    uri: str

    def key(self) -> tuple[str, ...]:
        """The record's place in an export's stable order (pre-order, siblings by name)."""
        u = CtxURI.parse(self.uri)
        return (u.account, u.scope, *u.segments)


class NodeRecord(_Record):
    """A node: its levels, its meta, its relations and its history."""

    kind: Literal["node"] = "node"
    context_type: ContextType = ContextType.MEMORY
    category: str = ""
    owner_space: str
    version: int = Field(ge=1)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    content_hash: str
    source_refs: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    levels: Levels = Field(default_factory=Levels)
    relations: RelationsDoc | None = None
    history: list[HistoryEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> NodeRecord:
        u = CtxURI.parse(self.uri)
        if not u.segments:
            raise ValueError(f"{self.uri} is a scope root, not a node")
        if node_uri(u) != self.uri:
            raise ValueError(f"uri {self.uri!r} is not canonical (write {node_uri(u)!r})")
        if self.owner_space != owner_space_of(u):
            raise ValueError(f"owner_space {self.owner_space!r} does not match {self.uri}")
        lv = self.levels
        if self.content_hash != content_hash(lv.abstract, lv.overview, lv.content):
            raise ValueError("content_hash does not match the levels")
        for edge in self.relations.edges if self.relations else []:
            if CtxURI.parse(edge.to_uri).account != u.account:
                raise ValueError(f"relation to {edge.to_uri} crosses accounts")
        return self

    @property
    def account(self) -> str:
        return CtxURI.parse(self.uri).account


class SessionRecord(_Record):
    """A session's recorded owner (``ctx://ACCOUNT/sessions/SESSION/``)."""

    kind: Literal["session"] = "session"
    user_id: str = Field(min_length=1)
    agent_id: str = Field(min_length=1)

    @model_validator(mode="after")
    def _a_session(self) -> SessionRecord:
        u = CtxURI.parse(self.uri)
        if u.scope != "sessions" or len(u.segments) != 1 or str(u.as_dir()) != self.uri:
            raise ValueError(f"{self.uri!r} is not a session (ctx://ACCOUNT/sessions/ID/)")
        return self

    @property
    def session_id(self) -> str:
        return CtxURI.parse(self.uri).segments[0]


ExportRecord = Annotated[NodeRecord | SessionRecord, Field(discriminator="kind")]
_RECORD: TypeAdapter[NodeRecord | SessionRecord] = TypeAdapter(ExportRecord)


def parse_line(line: str | bytes, number: int) -> NodeRecord | SessionRecord:
    """One line of an export as its record (`RecordError` naming the line otherwise)."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise RecordError(number, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(number, "a record is a JSON object")
    if data.get("format") != FORMAT_VERSION:
        raise RecordError(
            number, f"format {data.get('format')!r} is not {FORMAT_VERSION} (the version read)"
        )
    try:
        return _RECORD.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "record"
        raise RecordError(number, f"{loc}: {first['msg']}") from None


def dump_line(record: NodeRecord | SessionRecord) -> str:
    """One record as one line of JSON (with its newline)."""
    return record.model_dump_json(exclude_none=False) + "\n"


# --------------------------------------------------------------------------- node files
def node_files(record: NodeRecord) -> dict[str, bytes]:
    """The files of the node `record` describes, as the FS writes them."""
    meta = NodeMeta(
        uri=record.uri,
        category=record.category,
        context_type=record.context_type,
        owner_space=record.owner_space,
        version=record.version,
        created_at=record.created_at,
        updated_at=record.updated_at,
        content_hash=record.content_hash,
        source_refs=record.source_refs,
        metadata=record.metadata,
    )
    files = {
        ABSTRACT_FILE: record.levels.abstract.encode("utf-8"),
        OVERVIEW_FILE: record.levels.overview.encode("utf-8"),
        CONTENT_FILE: record.levels.content.encode("utf-8"),
        META_FILE: meta.to_bytes(),
    }
    if record.history:
        files[HISTORY_FILE] = b"".join(
            e.model_dump_json().encode("utf-8") + b"\n" for e in record.history
        )
    if record.relations is not None:
        files[RELATIONS_FILE] = (record.relations.model_dump_json(indent=2) + "\n").encode()
    return files


def record_of(files: dict[str, bytes | None]) -> NodeRecord:
    """The record of a node from its files (as `ContextFS.read_files` returns them)."""
    raw_meta = files.get(META_FILE)
    if raw_meta is None:
        raise ValueError(f"a node without {META_FILE}")
    meta = NodeMeta.model_validate_json(raw_meta)

    def text(name: str) -> str:
        raw = files.get(name)
        return raw.decode("utf-8") if raw is not None else ""

    history = files.get(HISTORY_FILE) or b""
    relations = files.get(RELATIONS_FILE)
    return NodeRecord(
        uri=meta.uri,
        context_type=meta.context_type,
        category=meta.category,
        owner_space=meta.owner_space,
        version=meta.version,
        created_at=meta.created_at,
        updated_at=meta.updated_at,
        content_hash=meta.content_hash,
        source_refs=meta.source_refs,
        metadata=meta.metadata,
        levels=Levels(
            abstract=text(ABSTRACT_FILE),
            overview=text(OVERVIEW_FILE),
            content=text(CONTENT_FILE),
        ),
        relations=RelationsDoc.model_validate_json(relations) if relations is not None else None,
        history=[HistoryEntry.model_validate_json(ln) for ln in history.splitlines() if ln.strip()],
    )


__all__ = [
    "FORMAT_VERSION",
    "ExportRecord",
    "Levels",
    "NodeRecord",
    "RecordError",
    "SessionRecord",
    "dump_line",
    "node_files",
    "parse_line",
    "record_of",
]
