"""Import of mem0 memories: one JSON object per line, each becoming one memory node.

The fields read (those of mem0's `get_all` / export records; any other field is ignored):

- ``id`` (required): the memory's id; the node is ``…/memories/{category}/mem0-{id}``.
- ``memory`` (required, non-empty): the memory's text: its L2 content and L1 overview, its
  first line the L0 abstract.
- ``user_id`` / ``agent_id`` (one required): the owner: the user's space
  ``ctx://ACCOUNT/users/USER/`` when there is a user, else the agent's.
- ``created_at`` (required) and ``updated_at`` (default: ``created_at``): ISO 8601; a time
  without an offset is UTC. They are the node's dates and its history's first entry.
- ``metadata`` (object), ``categories`` (list of strings), ``run_id``, ``hash``: kept in the
  node's metadata under ``mem0``.

A record that breaks a rule is named with its line number, and nothing of the file is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxpipe.core.enums import MemoryCategory
from ctxpipe.core.models import content_hash, stable_id
from ctxpipe.core.uri import CtxURI, slugify
from ctxpipe.fs.history import NodeChange, make_entry
from ctxpipe.portability.importer import Numbered
from ctxpipe.portability.records import Levels, NodeRecord, RecordError

MAX_ABSTRACT = 200
USER_CATEGORY = MemoryCategory.ENTITIES
AGENT_CATEGORY = MemoryCategory.PATTERNS


class Mem0Memory(BaseModel):
    """One mem0 memory as it is exported (fields not listed here are ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=200)
    memory: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    hash: str | None = None
    metadata: dict[str, Any] | None = None
    categories: list[str] | None = None
    created_at: datetime
    updated_at: datetime | None = None

    @field_validator("memory")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the memory's text is empty")
        return value.strip()

    @field_validator("created_at", "updated_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _segment(memory_id: str) -> str:
    """``mem0-{id}`` when the id is a clean URI segment, else a slug plus a hash of it."""
    clean = slugify(memory_id, max_len=80)
    if clean == memory_id:
        return f"mem0-{clean}"
    return f"mem0-{clean}-{stable_id(memory_id, length=8)}"


def to_record(m: Mem0Memory, account: str, category: str | None = None) -> NodeRecord:
    """The node record of one mem0 memory (version 1, with its dates)."""
    if m.user_id:
        scope, owner = "users", m.user_id
    elif m.agent_id:
        scope, owner = "agents", m.agent_id
    else:
        raise ValueError("neither user_id nor agent_id: the memory has no owner")
    default = USER_CATEGORY if scope == "users" else AGENT_CATEGORY
    cat = category or default.value
    uri = CtxURI.parse(f"ctx://{account}/{scope}/{owner}/memories/{cat}/{_segment(m.id)}")
    first = m.memory.splitlines()[0].strip()
    abstract = first if len(first) <= MAX_ABSTRACT else first[: MAX_ABSTRACT - 1] + "…"
    levels = Levels(abstract=abstract, overview=m.memory, content=m.memory)
    digest = content_hash(levels.abstract, levels.overview, levels.content)
    updated = m.updated_at or m.created_at
    if updated < m.created_at:
        raise ValueError("updated_at is before created_at")
    origin = {
        k: v
        for k, v in {
            "id": m.id,
            "hash": m.hash,
            "run_id": m.run_id,
            "agent_id": m.agent_id if scope == "users" else None,
            "categories": m.categories,
            "metadata": m.metadata,
        }.items()
        if v is not None
    }
    entry = make_entry(
        str(uri),
        1,
        m.created_at,
        None,
        levels.model_dump(),
        ("", digest),
        [],
        [],
        NodeChange(action="create", reason=f"imported from mem0 (memory {m.id})"),
    )
    return NodeRecord(
        uri=str(uri),
        category=cat,
        owner_space=f"{scope}/{owner}",
        version=1,
        created_at=m.created_at,
        updated_at=updated,
        content_hash=digest,
        metadata={"source": "mem0", "observed_at": m.created_at.isoformat(), "mem0": origin},
        levels=levels,
        history=[entry],
    )


def mem0_parser(
    account: str, category: str | None = None
) -> Callable[[str, int], Iterator[Numbered]]:
    """A line parser for `read_lines`: one mem0 memory per line, as its node record."""
    if category is not None:
        MemoryCategory(category)  # a category a memory can have
    CtxURI.parse(f"ctx://{account}/users/")

    def parse(line: str, number: int) -> Iterator[Numbered]:
        try:
            data = json.loads(line)
        except ValueError as exc:
            yield number, RecordError(number, f"not JSON: {exc}")
            return
        if not isinstance(data, dict):
            yield number, RecordError(number, "a mem0 memory is a JSON object")
            return
        try:
            yield number, to_record(Mem0Memory.model_validate(data), account, category)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first["loc"]) or "memory"
            yield number, RecordError(number, f"{loc}: {first['msg']}")
        except ValueError as exc:  # an owner or id no URI can hold, dates out of order
            yield number, RecordError(number, str(exc))

    return parse


__all__ = ["AGENT_CATEGORY", "USER_CATEGORY", "Mem0Memory", "mem0_parser", "to_record"]
