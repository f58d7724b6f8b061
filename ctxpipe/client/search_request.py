"""`SearchRequest`: one search — the query, the recent conversation it is read with (intent
analysis), and how it is narrowed — as the API, the CLI, the client and the MCP server pass it
down to the read path (`ReadPath.search`). Who asks travels beside it as a `RequestContext`;
the API body is the two together (`SearchIn`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ctxpipe.client.request_fields import AS_OF, AsOf, Query
from ctxpipe.core.session import Message


class SearchRequest(BaseModel):
    """A hierarchical search: the query is read with the recent messages (intent analysis)."""

    model_config = ConfigDict(extra="forbid")

    query: Query
    recent: list[Message] = Field(default_factory=list, max_length=200)
    scopes: list[str] | None = Field(None, max_length=50)
    as_of: AsOf = Field(None, description=AS_OF)


__all__ = ["SearchRequest"]
