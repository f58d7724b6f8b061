"""The API as deployed: a real uvicorn process (`ctxpipe serve`) in front of real Celery
workers, PostgreSQL and Redis. A producer commits through the Python client, waits, and an
agent finds the memory back; another account's key sees none of it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from celery_stack import ROOT, SAMPLE_SESSION, ctxpipe, settings_env, start_worker
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ctxpipe.client import CtxApiError, CtxClient
from ctxpipe.storage.netutil import free_port


@pytest.fixture
def stack_settings(make_settings, clean_db, clean_redis):  # type: ignore[no-untyped-def]
    s = make_settings()
    s.fs_root.mkdir(parents=True, exist_ok=True)
    s.var_dir.mkdir(parents=True, exist_ok=True)
    return s


def make_key(settings, *args: str) -> str:  # type: ignore[no-untyped-def]
    proc = ctxpipe(settings, "keys", "create", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["key"]  # type: ignore[no-any-return]


def mcp_find(server: Any, query: str, **who: str) -> tuple[list[str], dict[str, Any]]:
    """Tools listed and one `find` call, through the MCP SDK's own client."""

    async def go() -> tuple[list[str], dict[str, Any]]:
        async with Client(server, read_timeout_seconds=60) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            res = await client.call_tool("find", {"query": query, "top_k": 5, **who})
            assert not res.is_error, res.content
            return names, res.structured_content or {}

    return anyio.run(go)


def wait_listening(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


def test_commit_wait_find_through_a_uvicorn_process(stack_settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    s = stack_settings
    port = free_port()
    producer = make_key(s, "--account", "acme", "--scopes", "read,commit")
    agent = make_key(s, "--account", "acme", "--user", "alice", "--scopes", "read")
    stranger = make_key(s, "--account", "globex", "--scopes", "read,commit")
    log = open(tmp_path / "api.log", "wb")  # noqa: SIM115 - closed below
    api = subprocess.Popen(
        [sys.executable, "-m", "ctxpipe", "serve", "--port", str(port)],
        cwd=ROOT,
        env=settings_env(s),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    workers = []
    try:
        workers.append(start_worker(s, "commit,maintenance", 2, tmp_path))
        workers.append(start_worker(s, "extract", 2, tmp_path))
        workers.append(start_worker(s, "embed", 1, tmp_path, pool="solo"))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert api.poll() is None, (tmp_path / "api.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "api.log").read_text()
            time.sleep(0.2)

        with CtxClient(url, producer, user_id="alice", agent_id="helper") as client:
            cid = client.commit(
                SAMPLE_SESSION["messages"], session_id="s-api", commit_id="e2e-api-1"
            )
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
            wait_listening(mcp_url, mcp_http, tmp_path / "mcp.log")
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
        assert (
            'route="/v1/find"' in metrics and 'ctxpipe_commits{phase="registered"} 1.0' in metrics
        )
    finally:
        for w in workers:
            w.stop()
        api.terminate()
        try:
            api.wait(timeout=20)
        except subprocess.TimeoutExpired:
            api.kill()
        log.close()
    text = (tmp_path / "api.log").read_text()
    assert "Traceback" not in text, text
    assert producer.split("_", 2)[2] not in text  # keys never reach the log
    mcp_text = (tmp_path / "mcp.log").read_text()
    assert "Traceback" not in mcp_text and agent.split("_", 2)[2] not in mcp_text, mcp_text
