"""Inputs and outputs of the read path (find, search, build_context)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import date
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

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
    embedding: Any = None  # the chunk's stored vector (numpy, as pgvector loads it)


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


class FindHit(BaseModel):
    """One retrieved item: the text returned, what it cites, and where it came from."""

    uri: str
    level: int
    chunk_index: int = 0
    chunk_id: str = ""
    context_type: str = "memory"
    category: str = ""
    owner_space: str = ""
    parent_uri: str = ""
    score: float = Field(description="fused score (reciprocal rank fusion, higher is better)")
    similarity: float = Field(0.0, description="cosine similarity of the matched chunk")
    text_rank: float = 0.0
    vector_rank: int | None = None
    fts_rank: int | None = None
    abstract: str = Field("", description="the node's L0 line")
    text: str = Field("", description="the returned text: the part of the chunk that matched")
    source_refs: list[str] = Field(
        default_factory=list, description="message ids ('session:msgid') the text cites"
    )
    tokens: int = Field(0, description="tokens of the returned text (L0 line included)")
    role: str = Field("", description="who it is from: user/assistant (a turn) or memory")
    speaker: str = Field("", description="the speaker's name (a turn)")
    date: str = Field(
        "",
        description="ISO date: when the turn was said; for a memory, the date of the event it "
        "records, else of the session it was learned from",
    )
    node_version: int = 0
    chunk_text: str = Field("", exclude=True, repr=False, description="the whole matched chunk")

    @property
    def message_ids(self) -> list[str]:
        return [r.split(":", 1)[1] if ":" in r else r for r in self.source_refs]

    def returned_text(self) -> str:
        """What the caller reads: the L0 line, then the matched text when it differs."""
        if not self.abstract or self.text == self.abstract:
            return self.text or self.abstract
        if not self.text:
            return self.abstract
        return f"{self.abstract}\n{self.text}"


class FindResult(BaseModel):
    query: str
    groups: dict[str, list[FindHit]] = Field(
        default_factory=dict, description="hits by context type, best first"
    )
    plan: str = ""
    owner_rows: int | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)

    @property
    def hits(self) -> list[FindHit]:
        """All hits, best first."""
        merged = [h for hs in self.groups.values() for h in hs]
        return sorted(merged, key=lambda h: -h.score)

    @property
    def total_tokens(self) -> int:
        return sum(h.tokens for hs in self.groups.values() for h in hs)

    @classmethod
    def from_hits(cls, query: str, hits: list[FindHit], **kw: Any) -> FindResult:
        groups: dict[str, list[FindHit]] = {}
        for h in sorted(hits, key=lambda h: -h.score):
            groups.setdefault(h.context_type or "memory", []).append(h)
        return cls(query=query, groups=groups, **kw)


class TrajectoryStep(BaseModel):
    """One drill-down step of hierarchical retrieval (for inspection)."""

    round: int
    node: str = Field(description="the directory or node drilled into ('' for the global step)")
    kind: str = Field(description="global | directory | node")
    parent_score: float = 0.0
    children: list[tuple[str, float, float]] = Field(
        default_factory=list, description="(uri#chunk, child score, propagated final score)"
    )
    top_score: float = 0.0
    changed: bool = True


class TypedQueryResult(BaseModel):
    query: str
    context_type: str
    intent: str = ""
    priority: int = 3
    hits: list[FindHit] = Field(default_factory=list)
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    rounds: int = 0
    converged: bool = False


class SearchResult(BaseModel):
    query: str
    reasoning: str = ""
    intent_source: str = Field("", description="llm | fallback | none")
    queries: list[TypedQueryResult] = Field(default_factory=list)
    groups: dict[str, list[FindHit]] = Field(default_factory=dict)
    timings_ms: dict[str, float] = Field(default_factory=dict)

    @property
    def hits(self) -> list[FindHit]:
        merged = [h for hs in self.groups.values() for h in hs]
        return sorted(merged, key=lambda h: -h.score)

    @property
    def total_tokens(self) -> int:
        return sum(h.tokens for hs in self.groups.values() for h in hs)


__all__ = [
    "CONTEXT_TYPES",
    "FindFilters",
    "FindHit",
    "FindResult",
    "SearchResult",
    "TrajectoryStep",
    "TypedQueryResult",
]
