"""Inputs and outputs of `build_context` and the section layout."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from ctxpipe.client.results import ContextItem, ContextResult, ContextSection
from ctxpipe.core.session import Message

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


__all__ = [
    "SECTION_ORDER",
    "TITLES",
    "ContextItem",
    "ContextRequest",
    "ContextResult",
    "ContextSection",
]
