"""What the read path answers: `find` and `search` hits, and `build_context`'s sections.

Owned by the client (they are the bodies of the /v1 read responses); the engine builds them
(`ctxpipe.retrieval` imports them from here).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


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


class GroupedHits(BaseModel):
    """Hits by context type, best first within each; `hits` is all of them, best first."""

    groups: dict[str, list[FindHit]] = Field(
        default_factory=dict, description="hits by context type, best first"
    )

    @property
    def hits(self) -> list[FindHit]:
        """All hits, best first."""
        merged = [h for hs in self.groups.values() for h in hs]
        return sorted(merged, key=lambda h: -h.score)

    @property
    def total_tokens(self) -> int:
        return sum(h.tokens for hs in self.groups.values() for h in hs)


class FindResult(GroupedHits):
    query: str
    plan: str = ""
    owner_rows: int | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)

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


class SearchResult(GroupedHits):
    query: str
    reasoning: str = ""
    intent_source: str = Field("", description="llm | fallback | none")
    queries: list[TypedQueryResult] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)


class TokenBudget(BaseModel):
    total: int
    system_prompt: int = 0
    user_prefs: int = 0
    short_term: int = 0
    long_term: int = 0
    retrieval: int = 0
    profile: str = "default"
    long_conversation: bool = False

    @property
    def allocated(self) -> int:
        return (
            self.system_prompt + self.user_prefs + self.short_term + self.long_term + self.retrieval
        )

    def section(self, name: str) -> int:
        return int(getattr(self, name))


class UpdateStrategy(StrEnum):
    COMPUTE_DELTA = "compute_delta"
    APPEND_ONLY = "append_only"
    UPDATE_CONVERSATION_ONLY = "update_conversation_only"
    FULL_REBUILD = "full_rebuild"


class Delta(BaseModel):
    strategy: UpdateStrategy
    previous_hash: str = ""
    current_hash: str = ""
    new_messages: list[str] = Field(default_factory=list)
    modified_sections: list[str] = Field(default_factory=list)
    removed_sections: list[str] = Field(default_factory=list)
    reused_sections: list[str] = Field(default_factory=list)
    new_retrieval_items: list[str] = Field(default_factory=list)
    retrieval_reused: bool = False
    tokens_saved: int = 0
    delta_tokens: int = 0


class ContextItem(BaseModel):
    key: str
    uri: str = ""
    view: int = 0
    text: str
    tokens: int
    priority: int
    score: float = 0.0
    source_refs: list[str] = Field(default_factory=list)
    truncated: bool = False


class ContextSection(BaseModel):
    name: str
    title: str
    budget: int
    tokens: int = 0
    items: list[ContextItem] = Field(default_factory=list)
    hash: str = ""


class ContextResult(BaseModel):
    text: str
    total_tokens: int
    budget: TokenBudget
    sections: list[ContextSection]
    cited_refs: list[str] = Field(default_factory=list)
    delta: Delta
    typed_queries: list[str] = Field(default_factory=list)
    profile_found: bool = True
    timings_ms: dict[str, float] = Field(default_factory=dict)


__all__ = [
    "ContextItem",
    "ContextResult",
    "ContextSection",
    "Delta",
    "FindHit",
    "FindResult",
    "SearchResult",
    "TokenBudget",
    "TrajectoryStep",
    "TypedQueryResult",
    "UpdateStrategy",
]
