"""Tracing (OpenTelemetry, off unless `OTEL_TRACES_EXPORTER` names an exporter) and the log
lines: what an operator sees of a commit, an LLM call and a read."""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from early_processes import Command, EarlyProcesses
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from outbox_twin import MemoryOutbox, upsert_event

from ctxpipe.cli.consoles import RULE_WIDTH, UNWRAPPED_WIDTH, Console
from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.llm_schemas import IntentOutput
from ctxpipe.core.models import ContextNode, LLMUsage
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS, FSRelationStore
from ctxpipe.index.indexer import Indexer
from ctxpipe.index.memory_replica import MemoryReplica
from ctxpipe.index.worker import IndexWorker
from ctxpipe.observability import spans
from ctxpipe.observability.logs import OneLineFormatter, TraceContextFilter
from ctxpipe.observability.tracing import (
    ParentedClientSpans,
    TracingConfigError,
    build_provider,
    exporter_names,
    resource,
)
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime
from tasks.telemetry import commit_id_of

if TYPE_CHECKING:  # the fake model of tests/unit/conftest.py
    from conftest import HashEmbedder

CTX = RequestContext(account_id="acme", user_id="alice", agent_id="helper", session_id="s1")
MESSAGES = [
    {"id": "m1", "role": "user", "content": "I'm a backend developer and I live in Lisbon."},
    {"id": "m2", "role": "assistant", "content": "Nice! What are you working on?"},
    {"id": "m3", "role": "user", "content": "I prefer Go for services and table-driven tests."},
]


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    """The process's SDK provider (set once per process, as in a real one)."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    built = build_provider("ctxpipe-test", env={}, exporters=[])
    assert built is not None
    trace.set_tracer_provider(built)
    return built


@pytest.fixture
def exported(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = ParentedClientSpans(SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    yield exporter
    exporter.clear()
    processor.inner = SpanProcessor()  # a no-op: later tests' spans go nowhere


# ---------------------------------------------------------------- configuration
def test_tracing_is_off_unless_an_exporter_is_named() -> None:
    assert exporter_names({}) == []
    assert exporter_names({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert build_provider("x", env={}) is None
    assert exporter_names({"OTEL_TRACES_EXPORTER": "console, otlp"}) == ["console", "otlp"]
    off = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}
    assert exporter_names(off) == []


def test_an_unknown_exporter_or_protocol_is_a_clear_error() -> None:
    with pytest.raises(TracingConfigError, match="unknown exporter 'jaeger'"):
        exporter_names({"OTEL_TRACES_EXPORTER": "jaeger"})
    bad = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}
    with pytest.raises(TracingConfigError, match="expected http/protobuf or grpc"):
        build_provider("x", env=bad)


def test_the_resource_names_the_service_and_the_process(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    res = resource("ctxpipe-worker").attributes
    assert res["service.name"] == "ctxpipe-worker" and res["process.pid"] == os.getpid()
    assert (
        res["service.instance.id"] != resource("ctxpipe-worker").attributes["service.instance.id"]
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memory-prod")
    assert resource("ctxpipe-worker").attributes["service.name"] == "memory-prod"


# ---------------------------------------------------------------- spans
def test_an_in_process_commit_is_one_trace_with_a_span_per_phase_and_its_llm_calls(
    exported: InMemorySpanExporter, tmp_path: Path
) -> None:
    settings = Settings(fs_root=tmp_path / "fs", var_dir=tmp_path / "var")
    components = Runtime(settings, llm=RulesLLM(), use_database=False).components()
    req = CommitRequest(commit_id="c-trace", ctx=CTX, messages=MESSAGES)  # type: ignore[arg-type]
    result = CommitCoordinator(components).commit_sync(req)
    got = exported.get_finished_spans()
    assert len({s.context.trace_id for s in got}) == 1
    names = [s.name for s in got]
    for phase in ("archive", "extract", "plan", "write", "register"):
        assert f"commit.{phase}" in names, names
    extract = [s for s in got if s.name == "commit.extract"]
    assert {s.attributes["ctxpipe.extractor"] for s in extract} == {
        "profile",
        "preferences",
        "entity_event",
        "procedure",
    }
    assert all(
        s.attributes[spans.COMMIT_ID] == "c-trace" for s in got if s.name.startswith("commit.")
    )
    chats = [s for s in got if s.name == "chat rules"]
    assert chats and all(s.kind == SpanKind.CLIENT for s in chats)
    for s in chats:
        assert s.attributes["gen_ai.operation.name"] == "chat"
        assert s.attributes["gen_ai.request.model"] == "rules"
        assert s.attributes["gen_ai.provider.name"] == "rules"
        assert s.attributes["gen_ai.usage.input_tokens"] > 0
    (write,) = [s for s in got if s.name == "commit.write"]
    assert write.attributes["gen_ai.operation.name"] == "update_memory"
    assert write.attributes["gen_ai.memory.store.id"] == "acme"
    written = [r.uri for r in result.write_results]
    assert list(write.attributes["gen_ai.memory.record.id"]) == written[: spans.MAX_RECORD_IDS]


def test_a_failed_phase_is_recorded_on_its_span(exported: InMemorySpanExporter) -> None:
    with pytest.raises(ValueError), spans.phase_span("plan", "c-bad"):
        raise ValueError("a bad candidate")
    (span,) = exported.get_finished_spans()
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.events[0].name == "exception"


def test_the_query_text_is_recorded_only_when_content_capture_is_on(
    exported: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    with spans.memory_span("find", "acme", owner="users/alice", query="where do I live?") as s:
        spans.record_ids(s, ["ctx://acme/users/alice/memories/profile"])
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with spans.memory_span("find", "acme", query="where do I live?"):
        pass
    private, opted_in = exported.get_finished_spans()
    assert private.name == "search_memory find"
    assert private.attributes["gen_ai.operation.name"] == "search_memory"
    assert private.attributes["gen_ai.memory.store.id"] == "acme"
    assert list(private.attributes["gen_ai.memory.record.id"]) == [
        "ctx://acme/users/alice/memories/profile"
    ]
    assert "gen_ai.memory.query.text" not in private.attributes
    assert opted_in.attributes["gen_ai.memory.query.text"] == "where do I live?"


def test_database_client_spans_without_a_parent_are_not_exported(
    exported: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("test")
    db = {"db.system": "redis"}
    with tracer.start_as_current_span("BRPOP", kind=SpanKind.CLIENT, attributes=db):
        pass  # a broker's polling: no request, commit or task around it
    with tracer.start_as_current_span("commit.write"):
        with tracer.start_as_current_span("SET", kind=SpanKind.CLIENT, attributes=db):
            pass
    assert [s.name for s in exported.get_finished_spans()] == ["SET", "commit.write"]


async def _answer(llm: object, usage: LLMUsage) -> None:
    await llm.complete_json(  # type: ignore[attr-defined]
        "retrieval.intent_analysis",
        {"query": "which language does Alice prefer for services?", "max_queries": 3},
        IntentOutput,
        CTX,
        usage,
    )


def test_the_traced_llm_still_accounts_the_callers_usage(tmp_path: Path) -> None:
    import asyncio

    settings = Settings(fs_root=tmp_path / "fs", var_dir=tmp_path / "var")
    traced, plain = LLMUsage(), LLMUsage()
    asyncio.run(_answer(Runtime(settings, llm=RulesLLM()).llm, traced))
    asyncio.run(_answer(RulesLLM(), plain))
    assert traced == plain and traced.calls == 1 and traced.prompt_tokens > 0


# ---------------------------------------------------------------- logs and consoles
def _line(stream: io.StringIO) -> str:
    return stream.getvalue().splitlines()[-1]


def test_log_lines_carry_the_commit_and_trace_ids_on_one_line(
    exported: InMemorySpanExporter,
) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(OneLineFormatter())
    logger = logging.getLogger("ctxpipe.test.lines")
    logger.addHandler(handler)
    logger.propagate = False
    # whatever an earlier test left on the `ctxpipe` or root logger (levels, disabled loggers)
    logger.setLevel(logging.INFO)
    logger.disabled = False
    try:
        logger.warning("outside")
        assert "commit=- trace=- span=- | outside" in _line(stream)
        with spans.phase_span("write", "c-42") as span:
            try:
                raise OSError("disk full\nsecond line")
            except OSError:
                logger.exception("write failed")
        ids = span.get_span_context()
        lines = stream.getvalue().splitlines()
        assert len(lines) == 2  # the traceback is on the record's one line
        assert f"commit=c-42 trace={ids.trace_id:032x} span={ids.span_id:016x}" in lines[1]
        assert "write failed\\nTraceback" in lines[1] and "disk full\\nsecond line" in lines[1]
        assert lines[1].split(" ")[0].endswith("Z")  # UTC
    finally:
        logger.removeHandler(handler)


def test_rich_tables_are_not_wrapped_at_80_columns_off_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.console import Console as RichConsole
    from rich.table import Table

    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = Console(file=out)  # not a terminal
    uri = "ctx://acme/users/alice/memories/preferences/programming-languages/go-for-services"
    table = Table("uri", "abstract")
    table.add_row(uri, "prefers Go for services and always writes table-driven tests")
    console.print(table)
    console.rule("memory")
    lines = out.getvalue().splitlines()
    assert console.width == UNWRAPPED_WIDTH
    assert any(uri in line for line in lines)  # one row, one line
    assert len(lines) == 6 and len(lines[-1]) == RULE_WIDTH  # 5 of the table, the rule
    wrapped = io.StringIO()
    RichConsole(file=wrapped).print(table)  # Rich's own: 80 columns, the uri cut in two
    assert not any(uri in line for line in wrapped.getvalue().splitlines())
    monkeypatch.setenv("COLUMNS", "60")  # asked for: wrapped at that width
    assert Console(file=io.StringIO()).width == 60


def test_the_commit_id_of_a_commit_task() -> None:
    assert commit_id_of("ctxpipe.commit.archive", ["c-1"]) == "c-1"
    assert commit_id_of("ctxpipe.commit.plan", [[{}, {}], "c-1"]) == "c-1"  # chord body
    assert commit_id_of("ctxpipe.commit.start", ("c-1", "archive")) == "c-1"
    assert commit_id_of("ctxpipe.commit.submit", [{"messages": []}]) is None
    assert commit_id_of("ctxpipe.index.drain", []) is None


def test_otlp_exports_spans_to_the_endpoint_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        env = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        provider = build_provider("ctxpipe-api", env=env)
        assert provider is not None
        with provider.get_tracer("test").start_as_current_span("commit.submit"):
            pass
        assert provider.force_flush(10_000)
        provider.shutdown()
    finally:
        server.shutdown()
    assert [path for path, _ in received] == ["/v1/traces"]
    assert b"commit.submit" in received[0][1] and b"ctxpipe-api" in received[0][1]


# `ctxpipe --help` with an exporter it does not know, in a fresh interpreter started when
# collection ends (early_processes.py).
COMMAND = EarlyProcesses(
    __name__,
    {
        "help": Command(
            [sys.executable, "-m", "ctxpipe", "--help"],
            {**os.environ, "OTEL_TRACES_EXPORTER": "jaeger"},
        )
    },
)


def test_the_command_refuses_an_unknown_exporter_in_one_line() -> None:
    proc = COMMAND.outputs(timeout=60)["help"]
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "ctxpipe: OTEL_TRACES_EXPORTER='jaeger': unknown exporter 'jaeger' "
        "(expected console, otlp or none)"
    ]


def test_an_index_drain_on_threads_keeps_its_batches_in_the_callers_trace(
    exported: InMemorySpanExporter, tmp_path: Path, hash_embedder: type[HashEmbedder]
) -> None:
    """A drain's loops run on threads of their own (`CTXPIPE_OUTBOX_DRAINS`); each batch's
    span is still a child of the drain task's span, in its trace."""
    fs = ContextFS(tmp_path)
    nodes = [
        fs.write_node(
            ContextNode(
                uri=f"ctx://acme/users/alice/memories/events/e{i}",
                abstract=f"Alice hiked trail number {i} with her sister.",
                category="events",
            )
        )
        for i in range(6)
    ]
    events = [upsert_event(n) for n in nodes]
    outbox = MemoryOutbox()
    outbox.append_batch(events)
    indexer = Indexer(fs, FSRelationStore(fs), MemoryReplica(8), hash_embedder())
    worker = IndexWorker(outbox, indexer, batch_size=2, drains=3)  # type: ignore[arg-type]
    with trace.get_tracer("test").start_as_current_span("drain task") as parent:
        res = worker.drain(max_seconds=30)
    assert res.succeeded == 6 and sorted(outbox.done) == sorted(e.event_id for e in events)
    batches = [s for s in exported.get_finished_spans() if s.name == "index.batch"]
    assert len(batches) == 3
    here = parent.get_span_context()
    assert all(s.context is not None and s.context.trace_id == here.trace_id for s in batches)
    assert all(s.parent is not None and s.parent.span_id == here.span_id for s in batches)
