"""Each API call as data: method, path, query, body, and how to parse the answer (the sync
and async clients only differ in how they send it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter

from ctxpipe.client._base import messages_json
from ctxpipe.client.context_request import ContextRequest
from ctxpipe.client.find_request import FindRequest
from ctxpipe.client.models import ApiKey, CommitAccepted, CommitStatus, ReadOut, RemoveOut
from ctxpipe.client.results import ContextResult, FindResult, SearchResult
from ctxpipe.client.search_request import SearchRequest
from ctxpipe.client.session_models import SessionAppended
from ctxpipe.core.models import CommitOptions, NodeStat, NodeSummary, RelationEdge
from ctxpipe.core.session import Message

_SUMMARIES = TypeAdapter(list[NodeSummary])
_EDGES = TypeAdapter(list[RelationEdge])


@dataclass
class Call:
    method: str
    path: str
    parse: Callable[[Any], Any]
    params: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None


def commit(
    who: dict[str, str],
    messages: list[Message] | list[dict[str, Any]],
    *,
    commit_id: str | None = None,
    used_contexts: list[str] | None = None,
    used_tools: list[dict[str, Any]] | None = None,
    options: CommitOptions | None = None,
) -> Call:
    body: dict[str, Any] = {**who, "messages": messages_json(messages)}
    if commit_id:
        body["commit_id"] = commit_id
    if used_contexts:
        body["used_contexts"] = used_contexts
    if used_tools:
        body["used_tools"] = used_tools
    if options is not None:
        body["options"] = options.model_dump(mode="json")
    return Call(
        "POST", "/v1/commits", lambda d: CommitAccepted.model_validate(d).commit_id, body=body
    )


def add_messages(
    who: dict[str, str], messages: list[Message] | list[dict[str, Any]], close: bool
) -> Call:
    session_id = who.get("session_id")
    if not session_id:
        raise ValueError("add_messages needs a session_id (as an argument or a client default)")
    body: dict[str, Any] = {**who, "messages": messages_json(messages)}
    if close:
        body["close"] = True
    path = f"/v1/sessions/{quote(session_id, safe='')}/messages"
    return Call("POST", path, SessionAppended.model_validate, body=body)


def close_session(who: dict[str, str]) -> Call:
    session_id = who.get("session_id")
    if not session_id:
        raise ValueError("close_session needs a session_id (as an argument or a client default)")
    path = f"/v1/sessions/{quote(session_id, safe='')}/close"
    return Call("POST", path, SessionAppended.model_validate, body=who)


def whoami() -> Call:
    return Call("GET", "/v1/keys/self", ApiKey.model_validate)


def get_commit(commit_id: str) -> Call:
    return Call("GET", f"/v1/commits/{commit_id}", CommitStatus.model_validate)


def find(who: dict[str, str], request: FindRequest) -> Call:
    body = {**who, **request.model_dump(mode="json", exclude_none=True)}
    return Call("POST", "/v1/find", FindResult.model_validate, body=body)


def search(who: dict[str, str], request: SearchRequest) -> Call:
    body = {**who, **request.model_dump(mode="json", exclude_none=True)}
    return Call("POST", "/v1/search", SearchResult.model_validate, body=body)


def build_context(who: dict[str, str], request: ContextRequest) -> Call:
    body = {**who, **request.model_dump(mode="json", exclude_none=True)}
    return Call("POST", "/v1/context", ContextResult.model_validate, body=body)


def read(who: dict[str, str], uri: str, level: int) -> Call:
    return Call(
        "GET",
        "/v1/nodes/read",
        lambda d: ReadOut.model_validate(d).text,
        params={**who, "uri": uri, "level": level},
    )


def ls(who: dict[str, str], uri: str) -> Call:
    return Call("GET", "/v1/nodes/ls", _SUMMARIES.validate_python, params={**who, "uri": uri})


def tree(who: dict[str, str], uri: str, depth: int) -> Call:
    params = {**who, "uri": uri, "depth": depth}
    return Call("GET", "/v1/nodes/tree", _SUMMARIES.validate_python, params=params)


def stat(who: dict[str, str], uri: str) -> Call:
    return Call("GET", "/v1/nodes/stat", NodeStat.model_validate, params={**who, "uri": uri})


def relations(who: dict[str, str], uri: str) -> Call:
    params = {**who, "uri": uri}
    return Call("GET", "/v1/nodes/relations", _EDGES.validate_python, params=params)


def remove(who: dict[str, str], uri: str) -> Call:
    params = {**who, "uri": uri}
    return Call("DELETE", "/v1/nodes", lambda d: RemoveOut.model_validate(d).removed, params=params)
