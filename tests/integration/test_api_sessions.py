"""Open sessions through the HTTP API, the Python client and the MCP tool: appends are
idempotent by message id, commits are cut by count and on a close and run like any commit,
and the key rules hold (scope, account, user, path and body naming one session)."""

from __future__ import annotations

import anyio
import httpx
from api_world import ApiWorld, auth, served
from mcp import Client

from ctxpipe.client import CtxClient
from ctxpipe.mcp_server import build_server

TURNS = [
    {"id": "t1", "role": "user", "content": "I adopted a golden retriever puppy named Biscuit."},
    {"id": "t2", "role": "assistant", "content": "Congratulations! How old is Biscuit?"},
    {"id": "t3", "role": "user", "content": "Ten weeks. I live in Lisbon and I prefer tea."},
    {"id": "t4", "role": "assistant", "content": "Lisbon is lovely for walks with a puppy."},
    {"id": "t5", "role": "user", "content": "I work as a nurse at Santa Maria hospital."},
]


SCHEMA = "rt_api_sessions"
API_SETTINGS = {"session_max_messages": 4}  # the world of the module (conftest.py)


def test_append_cuts_by_count_and_close_commits_the_rest(world: ApiWorld) -> None:
    key = auth(world.key("acme", "read,commit", user="ann"))
    url = "/v1/sessions/open-1/messages"
    first = world.client.post(url, json={"messages": TURNS[:3]}, headers=key)
    assert first.status_code == 200, first.text
    assert first.json() | {"open_tokens": 0} == {
        "session_id": "open-1",
        "appended": 3,
        "duplicates": 0,
        "commit_ids": [],
        "open_messages": 3,
        "open_tokens": 0,
    }
    # a retry of the same call plus two new turns: the 4th message cuts a commit
    second = world.client.post(url, json={"messages": TURNS}, headers=key).json()
    assert (second["appended"], second["duplicates"], second["open_messages"]) == (2, 3, 1)
    (cut,) = second["commit_ids"]
    st = world.client.get(f"/v1/commits/{cut}", headers=key).json()
    assert st["finished"] and st["status"] == "success" and st["session_id"] == "open-1"
    assert st["result"]["stats"]["nodes_created"] >= 1

    closed = world.client.post("/v1/sessions/open-1/close", headers=key).json()
    (last,) = closed["commit_ids"]
    assert last != cut and closed["open_messages"] == 0
    assert world.client.get(f"/v1/commits/{last}", headers=key).json()["status"] == "success"
    empty = world.client.post("/v1/sessions/open-1/close", json={}, headers=key).json()
    assert empty["commit_ids"] == []


def test_the_key_rules_hold_for_open_sessions(world: ApiWorld) -> None:
    ann = auth(world.key("acme", "read,commit", user="ann"))
    world.client.post("/v1/sessions/open-2/messages", json={"messages": TURNS[:1]}, headers=ann)
    url = "/v1/sessions/open-2/messages"
    bob = auth(world.key("acme", "commit", user="bob"))
    assert world.client.post(url, json={"messages": TURNS[1:2]}, headers=bob).status_code == 403
    reader = auth(world.key("acme", "read", user="ann"))
    assert world.client.post(url, json={"messages": TURNS[1:2]}, headers=reader).status_code == 403
    other = world.client.post(
        url, json={"messages": TURNS[1:2], "account_id": "globex"}, headers=ann
    )
    assert other.status_code == 403
    mismatch = world.client.post(
        url, json={"messages": TURNS[1:2], "session_id": "open-3"}, headers=ann
    )
    assert mismatch.status_code == 400 and "session" in mismatch.json()["error"]["message"]
    dup = world.client.post(url, json={"messages": [TURNS[1], TURNS[1]]}, headers=ann)
    assert dup.status_code == 422 and "duplicate message id" in dup.json()["error"]["message"]
    bad = world.client.post("/v1/sessions/a..b/messages", json={"messages": TURNS}, headers=ann)
    assert bad.status_code == 422
    assert world.client.post("/v1/sessions/open-2/close", headers=bob).status_code == 403
    state = world.client.post(url, json={"messages": TURNS[:1]}, headers=ann).json()
    assert (state["duplicates"], state["open_messages"]) == (1, 1)  # nothing else got in


def test_the_client_and_the_mcp_tool_append(world: ApiWorld) -> None:
    key = world.key("acme", "read,commit", user="cleo")
    with served(world) as url, CtxClient(url, key, session_id="open-4") as c:
        out = c.add_messages(TURNS[:2])
        assert (out.appended, out.open_messages) == (2, 2)
        assert c.add_messages(TURNS[:2]).duplicates == 2
        closed = c.close_session()
        (cut,) = closed.commit_ids
        assert c.wait(cut).status == "success"

    async def via_mcp() -> dict:
        server = build_server("http://api", key, transport=httpx.ASGITransport(world.client.app))
        async with Client(server) as client:
            res = await client.call_tool(
                "add_messages", {"session_id": "open-5", "messages": TURNS[:3], "close": True}
            )
            assert not res.is_error, res.content
            return res.structured_content or {}

    done = anyio.run(via_mcp)
    assert done["appended"] == 3 and len(done["commit_ids"]) == 1 and done["open_messages"] == 0
