"""`SearchRequest` and `ContextRequest`: one search or build_context as every edge passes it to
the read path — validated where it is built (a blank query, a bad `as_of`, a budget of 0 are
refused, a blank query in the same words as a find), and handed down whole: the same request
reaches the read path, and gives the same result, whether it enters by the service, the API
route, the client (sync, or async under the MCP server) or the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from pydantic import BaseModel, ValidationError
from typer.testing import CliRunner

from ctxpipe.api.app import openapi_document
from ctxpipe.api.routes import read as routes
from ctxpipe.cli import app, services
from ctxpipe.client import ContextRequest, CtxClient, FindRequest, SearchRequest
from ctxpipe.client import _calls as calls
from ctxpipe.client.context_request import context_request
from ctxpipe.client.models import ApiKey, ContextIn, FindIn, Scope, SearchIn
from ctxpipe.client.results import (
    ContextResult,
    Delta,
    SearchResult,
    TokenBudget,
    UpdateStrategy,
)
from ctxpipe.client.search_request import search_request
from ctxpipe.core.config import Settings
from ctxpipe.core.session import Message, RequestContext
from ctxpipe.mcp_server import build_server
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService

MSG = {"id": "m1", "role": "user", "content": "I moved to Lisbon last spring."}
JUNE = date(2023, 6, 1)
ANN = RequestContext(account_id="acme", user_id="ann", session_id="s1")
KEY = ApiKey(key_id="k1", account_id="acme", user_id="ann", scopes=[Scope.READ])
DEAD = "postgresql://ctxpipe:x@127.0.0.1:1/ctxpipe"


# ------------------------------------------------------------------------- validation
def test_the_defaults_leave_the_budget_to_the_profile() -> None:
    s = SearchRequest(query="where does Ann live")
    assert (s.recent, s.scopes, s.as_of) == ([], None, None)
    c = ContextRequest(query="where does Ann live")
    assert (c.messages, c.budget, c.profile, c.system_prompt) == ([], None, "default", "")
    assert c.incremental is True and c.as_of is None


@pytest.mark.parametrize(
    "fields",
    [
        {"query": "q" * 8001},
        {"query": "q", "recent": [MSG] * 201},
        {"query": "q", "recent": [{"role": "user", "content": "a message without its id"}]},
        {"query": "q", "scopes": ["ctx://acme/users/ann/"] * 51},
        {"query": "q", "as_of": "2023-13-01"},
        {"query": "q", "as_of": "yesterday"},
        {"query": "q", "top_k": 3},  # a find's field, not a search's
        {"query": "q", "messages": []},  # build_context's
    ],
)
def test_a_bad_search_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SearchRequest.model_validate(fields)


@pytest.mark.parametrize(
    "fields",
    [
        {"query": "q" * 8001},
        {"query": "q", "budget": 0},
        {"query": "q", "budget": -5},
        {"query": "q", "budget": 1_000_001},
        {"query": "q", "profile": "p" * 65},
        {"query": "q", "system_prompt": "s" * 100_001},
        {"query": "q", "messages": [MSG] * 2001},
        {"query": "q", "messages": [{"id": "m1", "role": "robot", "content": "x"}]},
        {"query": "q", "as_of": "2023-02-30"},
        {"query": "q", "recent": []},  # a search's field
    ],
)
def test_a_bad_context_request_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ContextRequest.model_validate(fields)


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
@pytest.mark.parametrize(
    "model", [FindRequest, SearchRequest, ContextRequest, FindIn, SearchIn, ContextIn]
)
def test_a_blank_query_is_refused_in_the_same_words_everywhere(
    model: type[BaseModel], blank: str
) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({"query": blank})
    (error,) = info.value.errors()
    assert error["loc"] == ("query",)
    assert error["msg"] == "Value error, the query is empty"


@pytest.mark.parametrize("model", [SearchRequest, ContextRequest])
def test_as_of_takes_a_date_a_day_or_a_datetime(
    model: type[SearchRequest | ContextRequest],
) -> None:
    for value in (JUNE, "2023-06-01", datetime(2023, 6, 1, 9, 30)):
        assert model.model_validate({"query": "q", "as_of": value}).as_of == JUNE
    assert model.model_validate({"query": "q", "as_of": ""}).as_of is None


# ------------------------------------------------------------------------- the API body
def test_the_api_bodies_keep_their_field_names() -> None:
    schemas = openapi_document()["components"]["schemas"]
    who = {"account_id", "user_id", "agent_id", "session_id"}
    search = {"query", "recent", "scopes", "as_of"}
    context = {"query", "messages", "budget", "profile", "system_prompt", "incremental", "as_of"}
    assert set(schemas["SearchIn"]["properties"]) == who | search
    assert set(schemas["ContextIn"]["properties"]) == who | context
    assert schemas["SearchIn"]["required"] == schemas["ContextIn"]["required"] == ["query"]
    assert set(SearchRequest.model_fields) == search
    assert set(ContextRequest.model_fields) == context


def test_the_api_body_is_the_request_and_who_asks() -> None:
    scopes = ["ctx://acme/users/ann/"]
    body = SearchIn.model_validate(
        {"query": "q", "user_id": "ann", "recent": [MSG], "scopes": scopes, "as_of": "2023-06-01"}
    )
    req = body.request()
    assert type(req) is SearchRequest
    assert req == SearchRequest(
        query="q", recent=[Message.model_validate(MSG)], scopes=scopes, as_of=JUNE
    )
    built = ContextIn.model_validate(
        {"query": "q", "session_id": "s1", "messages": [MSG], "budget": 300, "incremental": False}
    ).request()
    assert type(built) is ContextRequest
    assert built == ContextRequest(
        query="q", messages=[Message.model_validate(MSG)], budget=300, incremental=False
    )
    with pytest.raises(ValidationError):
        ContextIn.model_validate({"query": "q", "budget": 0})


def test_the_client_builds_the_request_before_sending() -> None:
    req = search_request("q", [MSG], None, JUNE)
    assert calls.search({"user_id": "ann"}, req).body == {
        "user_id": "ann",
        "query": "q",
        "recent": [{**MSG, "injected": False}],
        "as_of": "2023-06-01",
    }
    assert search_request(req, None, ["ignored"], None) is req
    built = context_request("q", None, 400, "default", "", True, None)
    assert calls.build_context({}, built).body == {
        "query": "q",
        "messages": [],
        "budget": 400,
        "profile": "default",
        "system_prompt": "",
        "incremental": True,
    }
    with pytest.raises(ValidationError, match="the query is empty"):
        search_request(" ", None, None, None)
    with pytest.raises(ValidationError):
        context_request("q", None, 0, "default", "", True, None)


# ------------------------------------------------------------------------- every edge
class RecordingReadPath:
    """The read path's search and build_context: records each request and answers from it
    alone, so that what differs between edges would show in the requests or the results."""

    def __init__(self) -> None:
        self.seen: list[BaseModel] = []

    def search(self, req: SearchRequest, ctx: RequestContext) -> SearchResult:
        self.seen.append(req)
        return SearchResult(query=req.query, reasoning=req.model_dump_json())

    def build_context(self, req: ContextRequest, ctx: RequestContext) -> ContextResult:
        self.seen.append(req)
        return ContextResult(
            text=req.model_dump_json(),
            total_tokens=0,
            budget=TokenBudget(total=req.budget or 0, profile=req.profile),
            sections=[],
            delta=Delta(strategy=UpdateStrategy.FULL_REBUILD),
        )


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[ContextEngineService, RecordingReadPath]]:
    """A service whose read path records what reaches it (no database: nothing is read)."""
    settings = Settings(fs_root=tmp_path / "fs", database_url=DEAD)
    svc = ContextEngineService(Runtime(settings, use_database=False))
    read = RecordingReadPath()
    svc.__dict__["read_path"] = read  # the cached property, set before its first use
    yield svc, read
    del svc.__dict__["read_path"]  # nothing of a real read path to flush
    svc.close()


def api_over(svc: ContextEngineService) -> httpx.MockTransport:
    """The read routes over `svc` as the API serves them (its body models, its route
    functions), for a key of ann's."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        out: BaseModel
        if request.url.path == "/v1/search":
            out = routes.search(SearchIn.model_validate(body), svc, KEY)
        else:
            assert request.url.path == "/v1/context"
            out = routes.build_context(ContextIn.model_validate(body), svc, KEY)
        return httpx.Response(200, json=out.model_dump(mode="json"))

    return httpx.MockTransport(handle)


def mcp_call(svc: ContextEngineService, tool: str, args: dict[str, Any]) -> Any:
    """The MCP server's `tool` called with `args` (its client over the API over `svc`): the
    SDK's `CallToolResult`."""

    async def go() -> Any:
        server = build_server("http://api", "key", transport=api_over(svc))
        async with Client(server) as client:
            return await client.call_tool(tool, args)

    return anyio.run(go)


def mcp_tool(svc: ContextEngineService, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the MCP tool answered (it must not be an error)."""
    res = mcp_call(svc, tool, args)
    assert not res.is_error, res.content
    out: dict[str, Any] = res.structured_content
    return out


def cli(svc: ContextEngineService, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> str:
    """`ctxpipe ARGS --json` over `svc`: its standard output."""

    @contextmanager
    def service(*_: Any, **__: Any) -> Iterator[ContextEngineService]:
        yield svc

    monkeypatch.setattr(services, "service", service)
    result = CliRunner().invoke(app, [*args, "-a", "acme", "-u", "ann", "--json"])
    assert result.exit_code == 0, result.output
    return result.stdout


SEARCH = SearchRequest(query="where does Ann live?", as_of=JUNE)
CONTEXT = ContextRequest(query="where does Ann live?", budget=800, as_of=JUNE)


def test_a_search_is_the_same_whichever_edge_it_enters_by(
    recorded: tuple[ContextEngineService, RecordingReadPath], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, read = recorded
    q = SEARCH.query
    client = CtxClient("http://api", "key", user_id="ann", transport=api_over(svc))
    edges: dict[str, Callable[[], str]] = {
        "service, the request": lambda: svc.search(SEARCH, ANN).reasoning,
        "service, its fields": lambda: svc.search(q, ANN, as_of="2023-06-01").reasoning,
        "API route": lambda: routes.search(SearchIn(query=q, as_of=JUNE), svc, KEY).reasoning,
        "client, the request": lambda: client.search(SEARCH).reasoning,
        "client, its fields": lambda: client.search(q, as_of=JUNE).reasoning,
        "MCP": lambda: str(
            mcp_tool(svc, "search", {"query": q, "as_of": "2023-06-01"})["reasoning"]
        ),
        "CLI": lambda: (
            SearchResult.model_validate_json(
                cli(svc, monkeypatch, ["search", q, "--as-of", "2023-06-01"])
            ).reasoning
        ),
    }
    answers = {name: enter() for name, enter in edges.items()}
    assert read.seen == [SEARCH] * len(edges)
    assert read.seen[0] is SEARCH  # the service hands the request itself down
    for name, answer in answers.items():
        assert answer == SEARCH.model_dump_json(), name

    # every field, from the client
    scopes = ["ctx://acme/users/ann/"]
    client.search(q, [MSG], scopes=scopes, as_of=JUNE)
    full = SearchRequest(query=q, recent=[Message.model_validate(MSG)], scopes=scopes, as_of=JUNE)
    assert read.seen[-1] == full
    client.close()


def test_a_build_is_the_same_whichever_edge_it_enters_by(
    recorded: tuple[ContextEngineService, RecordingReadPath],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    svc, read = recorded
    q = CONTEXT.query
    client = CtxClient("http://api", "key", user_id="ann", transport=api_over(svc))
    edges: dict[str, Callable[[], str]] = {
        "service, the request": lambda: svc.build_context(CONTEXT, ANN).text,
        "service, its fields": lambda: svc.build_context(q, ANN, budget=800, as_of=JUNE).text,
        "API route": lambda: (
            routes.build_context(ContextIn(query=q, budget=800, as_of=JUNE), svc, KEY).text
        ),
        "client, the request": lambda: client.build_context(CONTEXT).text,
        "client, its fields": lambda: client.build_context(q, budget=800, as_of="2023-06-01").text,
        "MCP": lambda: str(
            mcp_tool(svc, "build_context", {"query": q, "budget": 800, "as_of": "2023-06-01"})[
                "text"
            ]
        ),
        "CLI": lambda: (
            ContextResult.model_validate_json(
                cli(svc, monkeypatch, ["context", q, "--budget", "800", "--as-of", "2023-06-01"])
            ).text
        ),
    }
    texts = {name: enter() for name, enter in edges.items()}
    assert read.seen == [CONTEXT] * len(edges)
    assert read.seen[0] is CONTEXT  # the service hands the request itself down
    for name, text in texts.items():
        assert text == CONTEXT.model_dump_json(), name

    # every field, from the CLI (the conversation from a file) and from the client
    talk = tmp_path / "talk.json"
    talk.write_text(json.dumps({"messages": [MSG]}), encoding="utf-8")
    full = ContextRequest(
        query=q,
        messages=[Message.model_validate(MSG)],
        budget=600,
        profile="coding",
        system_prompt="Be brief.",
        incremental=False,
        as_of=JUNE,
    )
    args = ["context", q, "-b", "600", "-p", "coding", "--system", "Be brief.", "--full"]
    cli(svc, monkeypatch, [*args, "-m", str(talk), "--as-of", "2023-06-01"])
    client.build_context(
        q,
        [MSG],
        600,
        "coding",
        system_prompt="Be brief.",
        incremental=False,
        as_of="2023-06-01",
    )
    assert read.seen[-2:] == [full, full]
    client.close()


def test_an_edge_refuses_an_invalid_request_before_the_read_path(
    recorded: tuple[ContextEngineService, RecordingReadPath],
) -> None:
    svc, read = recorded
    client = CtxClient("http://api", "key", user_id="ann", transport=api_over(svc))
    for call in (
        lambda: svc.search("  ", ANN),
        lambda: svc.build_context("q", ANN, budget=0),
        lambda: client.search("q", as_of="June"),
        lambda: client.build_context("", budget=100),
    ):
        with pytest.raises(ValidationError):
            call()
    client.close()
    for tool, args, why in (
        ("search", {"query": " "}, "invalid search: query: Value error, the query is empty"),
        ("build_context", {"query": "q", "budget": 0}, "invalid build_context: budget"),
        ("build_context", {"query": "q", "as_of": "June"}, "invalid build_context: as_of"),
    ):
        res = mcp_call(svc, tool, args)
        assert res.is_error and why in json.dumps([c.model_dump() for c in res.content])
    assert read.seen == []
