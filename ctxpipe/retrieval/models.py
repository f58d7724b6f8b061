"""Inputs and outputs of the read path (find, search, build_context)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import date
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from ctxpipe.client.results import (
    FindHit,
    FindResult,
    SearchResult,
    TrajectoryStep,
    TypedQueryResult,
)
from ctxpipe.core.uri import SCOPES

_SPACE_RE = re.compile(r"^[a-z]+(/[A-Za-z0-9][A-Za-z0-9_.@-]{0,127})?$")
CONTEXT_TYPES = ("memory", "session", "resource", "skill")


@dataclass(slots=True)
class CandidateRow:
    """One candidate chunk of the fused query (`retrieval_fused`), column by column."""

    chunk_id: str
    uri: str
    level: int
    chunk_index: int
    rrf: float = 0.0
    vr: int | None = None  # rank in the vector arm (None: not in it)
    tr: int | None = None  # rank in the text arm
    bm25: float = 0.0
    sim: float | None = None  # cosine similarity to the query
    text_content: str = ""
    context_type: str = ""
    category: str = ""
    owner_space: str = ""
    parent_uri: str = ""
    source_refs: list[str] = dataclass_field(default_factory=list)
    node_version: int = 0
    abstract_text: str = ""  # the node's L0 line(s)
    event_time: str | None = None
    observed_at: str | None = None
    embedding: Any = None  # the chunk's stored vector (numpy, as pgvector loads it), when asked


class TagCount(BaseModel):
    tag: str
    nodes: int


class FindFilters(BaseModel):
    """What a retrieval may see. `account_id` is always applied; everything else narrows it.

    `owner_spaces` (``users/u1``, ``agents/bot``, ``sessions/s1``, ``resources``…): None means
    every owner of the account — only trusted callers pass None; the service always sets it
    from the request context (`ctxpipe.retrieval.access`)."""

    account_id: str = Field(min_length=1, max_length=64)
    owner_spaces: list[str] | None = None
    context_types: list[str] | None = None
    categories: list[str] | None = None
    uri_prefixes: list[str] | None = None
    levels: list[int] | None = None
    parent_uris: list[str] | None = None
    uris: list[str] | None = None
    min_score: float = Field(0.0, ge=-1.0, le=1.0, description="minimum cosine similarity")
    as_of: date | None = Field(
        None,
        description="profile and preference facts valid on this date (None: valid now; "
        "`ctxpipe.core.validity`)",
    )

    @field_validator("owner_spaces")
    @classmethod
    def _spaces(cls, v: list[str] | None) -> list[str] | None:
        for s in v or []:
            if not _SPACE_RE.match(s) or s.split("/", 1)[0] not in SCOPES:
                raise ValueError(f"owner space {s!r} must look like 'users/u1' or 'resources'")
        return v

    @field_validator("context_types")
    @classmethod
    def _types(cls, v: list[str] | None) -> list[str] | None:
        for t in v or []:
            if t not in CONTEXT_TYPES:
                raise ValueError(f"context type {t!r} is not one of {', '.join(CONTEXT_TYPES)}")
        return v

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: list[int] | None) -> list[int] | None:
        for lv in v or []:
            if lv not in (0, 1, 2):
                raise ValueError(f"level {lv} is not 0, 1 or 2")
        return v

    @model_validator(mode="after")
    def _inside_account(self) -> FindFilters:
        root = f"ctx://{self.account_id}/"
        for field in ("uri_prefixes", "parent_uris", "uris"):
            for u in getattr(self, field) or []:
                if not u.startswith(root):
                    raise ValueError(f"{field}: {u!r} is outside account {self.account_id!r}")
        return self

    def narrowed(self, **changes: Any) -> FindFilters:
        return self.model_copy(update=changes)


__all__ = [
    "CONTEXT_TYPES",
    "FindFilters",
    "FindHit",
    "FindResult",
    "SearchResult",
    "TrajectoryStep",
    "TypedQueryResult",
]
