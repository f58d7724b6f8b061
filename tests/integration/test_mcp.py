"""The MCP server through the SDK's own client: it lists the six tools and calls each one;
the key decides what they see, as on the HTTP API."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
from api_world import ApiWorld
from mcp import Client

from ctxpipe.mcp_server import build_server

SCHEMA = "rt_mcp"  # the world of the module (conftest.py)
MESSAGES = [
    {"id": "m1", "role": "user", "content": "I adopted a golden retriever puppy named Biscuit."},
    {"id": "m2", "role": "assistant", "content": "Congratulations!"},
    {"id": "m3", "role": "user", "content": "I live in Lisbon and I prefer tea over coffee."},
]


def server_for(world: ApiWorld, key: str):  # type: ignore[no-untyped-def]
    transport = httpx.ASGITransport(app=world.client.app)
    return build_server("http://api", key, transport=transport)


def call(world: ApiWorld, key: str, steps: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def go() -> list[Any]:
        out = []
        async with Client(server_for(world, key)) as client:
            tools = await client.list_tools()
            out.append(sorted(t.name for t in tools.tools))
            for name, args in steps:
                if name == "reindex":
                    world.reindex()
                    continue
                res = await client.call_tool(name, args)
                out.append((res.is_error, res.structured_content, res.content))
        return out

    return anyio.run(go)


def test_tools_are_listed_and_each_one_works(world: ApiWorld) -> None:
    key = world.key(
        "acme",
        "read,commit",
        user="ann",
    )
    out = call(
        world,
        key,
        [
            ("commit_session", {"session_id": "mcp-s1", "messages": MESSAGES, "wait": True,
                                "commit_id": "mcp-c1"}),
            ("reindex", {}),
            ("find", {"query": "What is the dog called?", "top_k": 5}),
            ("search", {"query": "Where does ann live?"}),
            ("build_context", {"query": "dog and drinks", "budget": 400, "session_id": "q"}),
        ],
    )  # fmt: skip
    assert out[0] == ["add_messages", "build_context", "commit_session", "find", "read", "search"]
    err, committed, _ = out[1]
    assert not err and committed["commit_id"] == "mcp-c1" and committed["status"] == "success"
    err, found, _ = out[2]
    assert not err and any("Biscuit" in h["text"] for h in found["hits"])
    assert all(h["uri"].startswith("ctx://acme/") for h in found["hits"])
    err, searched, _ = out[3]
    assert not err and searched["hits"]
    err, built, _ = out[4]
    assert not err and "Biscuit" in built["text"] and built["total_tokens"] <= 400

    uri = found["hits"][0]["uri"]  # the node find cited best (an archive or a memory)
    (_, (err, read, _)) = call(world, key, [("read", {"uri": uri, "level": 2})])
    assert not err and read["text"]


def test_the_key_rules_hold_through_mcp(world: ApiWorld) -> None:
    bob = world.key("acme", "read", user="bob")
    (_, found, denied, commit) = call(
        world,
        bob,
        [
            ("find", {"query": "Biscuit the dog"}),
            ("read", {"uri": "ctx://acme/users/ann/", "level": 0}),
            ("commit_session", {"session_id": "b1", "messages": MESSAGES}),
        ],
    )
    assert not found[0] and all("/users/ann/" not in h["uri"] for h in found[1]["hits"])
    assert denied[0] and "403" in json.dumps([c.model_dump() for c in denied[2]])
    assert commit[0] and "lacks the 'commit' scope" in json.dumps(
        [c.model_dump() for c in commit[2]]
    )
    (_, dated, undated) = call(
        world,
        bob,
        [
            ("find", {"query": "Biscuit the dog", "as_of": "2023-06-01"}),
            ("find", {"query": "Biscuit the dog", "as_of": "June"}),
        ],
    )
    # as_of reaches the API as a date; anything else is refused where the FindRequest is built
    assert not dated[0]
    assert undated[0] and "as_of" in json.dumps([c.model_dump() for c in undated[2]])
    (_, bad) = call(world, "ctx_0000000000000000_" + "x" * 40, [("find", {"query": "x"})])
    assert bad[0] and "401" in json.dumps([c.model_dump() for c in bad[2]])
