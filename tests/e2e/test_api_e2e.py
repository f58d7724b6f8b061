"""The API as deployed: a real uvicorn process (`ctxpipe serve`) in front of real Celery
workers, PostgreSQL and Redis. A producer commits through the Python client, waits, and an
agent finds the memory back; another account's key sees none of it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from api_stack import ApiStack, secret_of, wait_answering
from celery_stack import ROOT, SAMPLE_SESSION, settings_env
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ctxpipe.client import CtxApiError, CtxClient
from ctxpipe.storage.netutil import free_port


def mcp_find(server: Any, query: str, **who: str) -> tuple[list[str], dict[str, Any]]:
    """Tools listed and one `find` call, through the MCP SDK's own client."""

    async def go() -> tuple[list[str], dict[str, Any]]:
        async with Client(server, read_timeout_seconds=60) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            res = await client.call_tool("find", {"query": query, "top_k": 5, **who})
            assert not res.is_error, res.content
            return names, res.structured_content or {}

    return anyio.run(go)


def test_commit_wait_find_through_a_uvicorn_process(api_stack: ApiStack, tmp_path: Path) -> None:
    s, url = api_stack.settings, api_stack.url
    producer = api_stack.key("--account", "acme", "--scopes", "read,commit")
    agent = api_stack.key("--account", "acme", "--user", "alice", "--scopes", "read")
    stranger = api_stack.key("--account", "globex", "--scopes", "read,commit")
    with CtxClient(url, producer, user_id="alice", agent_id="helper") as client:
        cid = client.commit(SAMPLE_SESSION["messages"], session_id="s-api", commit_id="e2e-api-1")
        assert cid == "e2e-api-1"
        done = client.wait(cid, timeout=120)
        assert done.status == "success" and done.result is not None
        assert done.result.stats.nodes_created >= 1

    with CtxClient(url, agent, agent_id="helper") as alice:
        deadline = time.monotonic() + 60
        while True:
            hits = alice.find("Where does the user live?", 5).hits
            if any("Lisbon" in h.text for h in hits):
                break
            assert time.monotonic() < deadline, [h.text for h in hits]
            time.sleep(0.5)
        assert all(h.uri.startswith("ctx://acme/") for h in hits)
        ctx = alice.build_context("Where does the user live?", budget=400)
        assert "Lisbon" in ctx.text and ctx.total_tokens <= 400
        assert alice.get_commit(cid).finished

    # MCP over stdio: an agent host launches `ctxpipe mcp` with the key in its environment
    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ctxpipe", "mcp", "--api-url", url],
        env=settings_env(s, CTXPIPE_API_KEY=agent),
        cwd=str(ROOT),
    )
    tools, found = mcp_find(stdio, "Where does the user live?")
    assert tools == [
        "add_messages", "build_context", "commit_session", "find", "read", "search"
    ]  # fmt: skip
    assert any("Lisbon" in h["text"] for h in found["hits"])
    # MCP over streamable HTTP: each request brings its own key
    mcp_port = free_port()
    mcp_log = open(tmp_path / "mcp.log", "wb")  # noqa: SIM115 - closed below
    mcp_http = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "mcp", "--transport", "http"]
        + ["--port", str(mcp_port), "--api-url", url],
        cwd=ROOT,
        env=settings_env(s),
        stdout=mcp_log,
        stderr=subprocess.STDOUT,
    )
    try:
        mcp_url = f"http://127.0.0.1:{mcp_port}/mcp"
        wait_answering(mcp_url, mcp_http, tmp_path / "mcp.log")
        for key, sees in ((agent, True), (stranger, False)):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
            _, found = mcp_find(
                streamable_http_client(mcp_url, http_client=http),
                "Where does the user live?",
                user_id="alice",
            )
            assert any("Lisbon" in h["text"] for h in found["hits"]) is sees
    finally:
        mcp_http.terminate()
        mcp_http.wait(timeout=20)
        mcp_log.close()

    with CtxClient(url, stranger, user_id="alice") as other:
        assert other.find("Where does the user live?", 5).hits == []
        with pytest.raises(CtxApiError) as denied:
            other.get_commit(cid)
        assert denied.value.status == 404
    metrics = httpx.get(f"{url}/metrics", timeout=5).text
    assert 'route="/v1/find"' in metrics and 'ctxpipe_commits{phase="registered"} 1.0' in metrics
    mcp_text = (tmp_path / "mcp.log").read_text()
    assert "Traceback" not in mcp_text and secret_of(agent) not in mcp_text, mcp_text
