"""The API as deployed: a real uvicorn process (`ctxpipe serve`) in front of real Celery
workers, PostgreSQL and Redis. A producer commits through the Python client, waits, and an
agent finds the memory back; another account's key sees none of it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from celery_stack import ROOT, SAMPLE_SESSION, ctxpipe, settings_env, start_worker

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
