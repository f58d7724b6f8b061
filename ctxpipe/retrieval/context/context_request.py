"""The inputs and outputs of `build_context` and the section layout. The request is the public
`ContextRequest` of the client package (validated where it is built: the API body, the CLI,
the client, the MCP tool, the service); the results are the client's result models."""

from __future__ import annotations

from ctxpipe.client.context_request import ContextRequest
from ctxpipe.client.results import ContextItem, ContextResult, ContextSection

# most stable first: everything before the first changed section is a reusable prompt prefix
SECTION_ORDER = ("system_prompt", "user_prefs", "long_term", "retrieval", "short_term")
TITLES = {
    "system_prompt": "",
    "user_prefs": "## User preferences",
    "long_term": "## Long-term memory",
    "retrieval": "## Retrieved context",
    "short_term": "## Conversation",
}


__all__ = [
    "SECTION_ORDER",
    "TITLES",
    "ContextItem",
    "ContextRequest",
    "ContextResult",
    "ContextSection",
]
