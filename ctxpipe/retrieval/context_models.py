"""Inputs and outputs of `build_context` and the section layout."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from ctxpipe.core.session import Message
from ctxpipe.retrieval.budget import TokenBudget
from ctxpipe.retrieval.incremental import Delta

# most stable first: everything before the first changed section is a reusable prompt prefix
SECTION_ORDER = ("system_prompt", "user_prefs", "long_term", "retrieval", "short_term")
TITLES = {
    "system_prompt": "",
    "user_prefs": "## User preferences",
    "long_term": "## Long-term memory",
    "retrieval": "## Retrieved context",
    "short_term": "## Conversation",
}


class ContextRequest(BaseModel):
    query: str
    messages: list[Message] = Field(default_factory=list)
    budget: int | None = None
    profile: str = "default"
    system_prompt: str = ""
    incremental: bool = True
    as_of: date | None = Field(
        None, description="profile and preference facts valid on this date (None: now)"
    )


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
    "SECTION_ORDER",
    "TITLES",
    "ContextItem",
    "ContextRequest",
    "ContextResult",
    "ContextSection",
]
