"""`FindRequest`: one find — the query and how it is narrowed — as the API, the CLI, the client
and the MCP server pass it down to the read path (`ReadPath.find`). Who asks (the account,
user, agent and session) travels beside it as a `RequestContext`; the API body is the two
together (`FindIn`)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

AS_OF = "profile and preference facts valid on this date (YYYY-MM-DD); omitted: valid now"


class FindRequest(BaseModel):
    """One hybrid (vector + full-text) retrieval."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=8000)
    top_k: int | None = Field(
        None, ge=1, le=200, description="hits at most (omitted: the server's find top_k, 10)"
    )
    budget_tokens: int | None = Field(
        None, ge=1, le=1_000_000, description="no more hits than fit in this many tokens"
    )
    scopes: list[str] | None = Field(None, max_length=50, description="URI prefixes")
    categories: list[str] | None = Field(None, max_length=50)
    context_types: list[str] | None = Field(None, max_length=10)
    min_score: float = Field(0.0, ge=-1.0, le=1.0, description="minimum cosine similarity")
    tags: list[str] | None = Field(
        None, max_length=50, description="only nodes that carry every one of these tags"
    )
    as_of: date | None = Field(None, description=AS_OF)

    @field_validator("query", mode="before")
    @classmethod
    def _not_blank(cls, v: object) -> object:
        # before the length check, so that "" is refused as empty too, in the same words
        if isinstance(v, str) and not v.strip():  # blank: arbitrary hits (and counted)
            raise ValueError("the query is empty")
        return v

    @field_validator("as_of", mode="before")
    @classmethod
    def _day(cls, v: Any) -> Any:
        if isinstance(v, datetime):
            return v.date()
        return None if v == "" else v


__all__ = ["AS_OF", "FindRequest"]
