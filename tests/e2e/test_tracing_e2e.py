"""One commit is one trace: the API (`ctxpipe serve`) that takes it, the commit, extract and
embed worker processes each write their spans with the console exporter
(`OTEL_TRACES_EXPORTER=console`, one JSON span a line on stdout), and the spans of the commit
share one trace id: the request, a span per pipeline phase, the LLM calls in the GenAI
conventions, the index worker's batch. A find is a `search_memory` span under its request.
The log lines carry the commit id and the trace id."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from api_stack import make_key
from celery_stack import ROOT, SAMPLE_SESSION, settings_env, start_worker

from ctxpipe.client import CtxClient
from ctxpipe.storage.netutil import free_port

COMMIT_ID = "e2e-trace-1"
SECOND_ID = "e2e-trace-2"  # through the same worker processes: a trace of its own
PHASES = {"commit.archive", "commit.extract", "commit.plan", "commit.write", "commit.register"}


def spans_in(text: str) -> list[dict[str, Any]]:
    """The console exporter's spans among a process's output lines."""
    out = []
    for line in text.splitlines():
        if line.startswith('{"name"'):
            span = json.loads(line)
            if "context" in span:
                out.append(span)
    return out


def serve(settings: Any, port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        api = subprocess.Popen(
            [sys.executable, "-m", "ctxpipe", "serve", "--port", str(port)],
            cwd=ROOT,
            env=settings_env(settings),
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return api
        except httpx.HTTPError:
            pass
        assert api.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)


def test_one_commit_is_one_trace_across_processes(  # type: ignore[no-untyped-def]
    stack_settings, tmp_path: Path, monkeypatch
):
    s = stack_settings
    key = make_key(s, "-a", "acme", "-u", "alice", "--scopes", "read,commit")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")  # the processes started from here on
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    api_log = tmp_path / "api.log"
    port = free_port()
    started = []
    api = None
    try:
        started.append(start_worker(s, "commit,maintenance", 2, tmp_path))
        started.append(start_worker(s, "extract", 2, tmp_path))
        started.append(start_worker(s, "embed", 1, tmp_path, pool="solo"))
        api = serve(s, port, api_log)
        with CtxClient(f"http://127.0.0.1:{port}", key, agent_id="helper") as client:
            cid = client.commit(
                SAMPLE_SESSION["messages"], session_id="s-trace", commit_id=COMMIT_ID
            )
            assert client.wait(cid, timeout=120).status == "success"
            second = client.commit(
                SAMPLE_SESSION["messages"], session_id="s-trace-2", commit_id=SECOND_ID
            )
            assert client.wait(second, timeout=120).status == "success"
            deadline = time.monotonic() + 90
            while not client.find("Where does the user live?", 5).hits:
                assert time.monotonic() < deadline, started[2].text()[-3000:]
                time.sleep(0.5)
    finally:
        if api is not None:
            api.terminate()
            api.wait(timeout=30)
        for w in started:
            w.stop()
    logs = [w.text() for w in started] + [api_log.read_text(errors="replace")]
    spans = [sp for text in logs for sp in spans_in(text)]

    # each commit's phases are in its own trace (a worker process that ran the first commit's
    # steps does not run the second's in the first's context)
    for commit_id in (COMMIT_ID, SECOND_ID):
        (sub,) = [
            sp
            for sp in spans
            if sp["name"] == "commit.submit" and sp["attributes"]["ctxpipe.commit.id"] == commit_id
        ]
        phases = [
            sp
            for sp in spans
            if sp["name"] in PHASES and sp["context"]["trace_id"] == sub["context"]["trace_id"]
        ]
        assert {sp["name"] for sp in phases} == PHASES, commit_id
        assert {sp["attributes"]["ctxpipe.commit.id"] for sp in phases} == {commit_id}

    (submit,) = [
        sp
        for sp in spans
        if sp["name"] == "commit.submit" and sp["attributes"]["ctxpipe.commit.id"] == COMMIT_ID
    ]
    assert submit["resource"]["attributes"]["service.name"] == "ctxpipe-api"
    trace_id = submit["context"]["trace_id"]
    trace = [sp for sp in spans if sp["context"]["trace_id"] == trace_id]
    by_id = {sp["context"]["span_id"]: sp for sp in trace}

    # the API request is the trace's root, and the submit runs under it
    (root,) = [sp for sp in trace if sp["parent_id"] is None]
    assert root["name"] == "POST /v1/commits" and root["kind"] == "SpanKind.SERVER", root
    parent = by_id[submit["parent_id"]]
    while parent["parent_id"] is not None:
        parent = by_id[parent["parent_id"]]
    assert parent is root
    # one trace across the API and the commit, extract and embed workers' processes
    pids = {sp["resource"]["attributes"]["process.pid"] for sp in trace}
    assert len(pids) >= 4, pids
    services = {sp["resource"]["attributes"]["service.name"] for sp in trace}
    assert services == {"ctxpipe-api", "ctxpipe-worker"}, services
    # a span per phase, each naming the commit; all four extractors
    names = {sp["name"] for sp in trace}
    assert PHASES <= names, names
    for sp in trace:
        if sp["name"] in PHASES:
            assert sp["attributes"]["ctxpipe.commit.id"] == COMMIT_ID
    extractors = {
        sp["attributes"]["ctxpipe.extractor"] for sp in trace if sp["name"] == "commit.extract"
    }
    assert extractors == {"profile", "preferences", "entity_event", "procedure"}
    # the Celery instrumentation's task spans carry the context from process to process
    assert {"run/ctxpipe.commit.archive", "run/ctxpipe.commit.plan"} <= names, names
    assert "index.batch" in names, names
    # the LLM calls in the GenAI conventions (the offline provider: the model is its name)
    chats = [sp for sp in trace if sp["attributes"].get("gen_ai.operation.name") == "chat"]
    assert chats, names
    for sp in chats:
        attrs = sp["attributes"]
        assert attrs["gen_ai.request.model"] == "rules" and sp["name"] == "chat rules"
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] >= 0
    (write,) = [sp for sp in trace if sp["name"] == "commit.write"]
    assert write["attributes"]["gen_ai.operation.name"] == "update_memory"
    assert write["attributes"]["gen_ai.memory.store.id"] == "acme"
    written = write["attributes"]["gen_ai.memory.record.id"]
    assert written and all(u.startswith("ctx://acme/") for u in written)

    # a find: `search_memory` under its own request, the query text not recorded
    finds = [sp for sp in spans if sp["name"] == "search_memory find"]
    assert finds and all(sp["context"]["trace_id"] != trace_id for sp in finds)
    found = finds[-1]
    assert found["attributes"]["gen_ai.memory.store.id"] == "acme"
    assert found["attributes"]["gen_ai.memory.record.id"]
    assert "gen_ai.memory.query.text" not in found["attributes"]
    assert found["parent_id"] is not None  # the request's server span

    # the workers' log lines name the commit and its trace (the exporter writes ids as hex
    # numbers, the log lines as 32 hex digits)
    line = f"commit={COMMIT_ID} trace={int(trace_id, 16):032x}"
    assert any(line in text for text in logs), logs[0][-3000:]
