"""Request and response bodies of the /v1 API: the client's models (`ctxpipe.client.models`;
the API imports them, the client never imports the API). Results of the read path are
`ctxpipe.client.results`."""

from __future__ import annotations

from ctxpipe.client.models import (
    CommitAccepted,
    CommitIn,
    CommitStatus,
    ContextIn,
    FindIn,
    Health,
    Identity,
    KeyIn,
    ReadOut,
    RemoveOut,
    SearchIn,
)

__all__ = [
    "CommitAccepted",
    "CommitIn",
    "CommitStatus",
    "ContextIn",
    "FindIn",
    "Health",
    "Identity",
    "KeyIn",
    "ReadOut",
    "RemoveOut",
    "SearchIn",
]
