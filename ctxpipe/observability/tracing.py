"""The OpenTelemetry SDK of one process, configured only through the standard `OTEL_*`
variables, and off unless `OTEL_TRACES_EXPORTER` names an exporter.

- `OTEL_TRACES_EXPORTER`: `console` (one JSON span a line on stdout), `otlp` (OTLP over
  HTTP/protobuf, or gRPC when `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` and its exporter is
  installed), or both, comma separated; unset or `none`: no tracing at all (the API's no-op
  tracer, nothing installed, nothing exported). `OTEL_SDK_DISABLED=true` wins over it.
- `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`), `..._HEADERS`, `..._TIMEOUT`:
  read by the OTLP exporter itself.
- `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`: the resource; without a service name the
  process's role names it (`ctxpipe-api`, `ctxpipe-worker`, `ctxpipe-cli`, …).
- `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`: sampling (default: parent based, always
  on), read by the SDK.
- `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`: the read path's spans carry the
  query text too (it can hold personal data: off by default).

`configure_tracing` installs the tracer provider once per process and the maintained
instrumentations of psycopg, redis and httpx; FastAPI's is applied to the app by the API's
composition root (`instrument_fastapi`), Celery's by the Celery app (`tasks.telemetry`): the
library itself never imports Celery. Database and Redis client spans that have no parent
(connection pool checks, a broker's idle polling) are not exported: they belong to no
request, commit or task and would only bury the traces that do.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanProcessor,
)
from opentelemetry.trace import SpanKind

log = logging.getLogger(__name__)

EXPORTERS = ("console", "otlp")
_state: dict[str, Any] = {}


class TracingConfigError(ValueError):
    """An `OTEL_*` variable that names something this process cannot do."""


def exporter_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The exporters `OTEL_TRACES_EXPORTER` asks for ([] : tracing is off)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    raw = env.get("OTEL_TRACES_EXPORTER", "")
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    names = [n for n in names if n != "none"]
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={raw!r}: unknown exporter {unknown[0]!r} "
            f"(expected {', '.join(EXPORTERS)} or none)"
        )
    return list(dict.fromkeys(names))


def tracing_requested(env: Mapping[str, str] | None = None) -> bool:
    return bool(exporter_names(env))


class ParentedClientSpans(SpanProcessor):
    """`inner`, except that a database or Redis client span without a parent is not exported
    (it belongs to no request, commit or task: a pool's health check, a broker's polling)."""

    def __init__(self, inner: SpanProcessor) -> None:
        self.inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        is_db = "db.system" in attrs or "db.system.name" in attrs
        if span.parent is None and span.kind == SpanKind.CLIENT and is_db:
            return
        self.inner.on_end(span)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def one_line(span: ReadableSpan) -> str:
    """A span as one line of JSON (the console exporter's format)."""
    return span.to_json(indent=None) + "\n"


class StdoutLines:
    """The process's standard output (file descriptor 1), written a whole line per call: a
    Celery worker redirects `sys.stdout` to its logger, and the pool processes of one worker
    share the descriptor (one `write` each, so their lines never interleave)."""

    def write(self, text: str) -> int:
        return os.write(1, text.encode("utf-8"))

    def flush(self) -> None:
        return None


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter(out=StdoutLines(), formatter=one_line)  # type: ignore[arg-type]
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError as exc:
            raise TracingConfigError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "installed; or use http/protobuf (the default, port 4318)"
            ) from exc
        return GrpcExporter()
    if protocol != "http/protobuf":
        raise TracingConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: expected http/protobuf or grpc"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _processor(name: str, exporter: SpanExporter) -> SpanProcessor:
    # console: written as each span ends (a process that exits at once loses none); otlp: in
    # batches, off the request path
    inner = SimpleSpanProcessor(exporter) if name == "console" else BatchSpanProcessor(exporter)
    return ParentedClientSpans(inner)


def resource(default_service: str) -> Resource:
    """`OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`, else `default_service`; plus this
    process's id and a unique instance id (each worker process is an instance)."""
    res = Resource.create({"process.pid": os.getpid(), SERVICE_INSTANCE_ID: str(uuid.uuid4())})
    name = str(res.attributes.get(SERVICE_NAME, ""))
    if not name or name.startswith("unknown_service"):
        res = res.merge(Resource({SERVICE_NAME: default_service}))
    return res


def build_provider(
    default_service: str,
    env: Mapping[str, str] | None = None,
    exporters: Sequence[tuple[str, SpanExporter]] | None = None,
) -> TracerProvider | None:
    """The tracer provider `env` asks for (None: tracing is off). `exporters` replaces the
    exporters named in the environment (tests)."""
    env = os.environ if env is None else env
    names = exporter_names(env)
    if not names and exporters is None:
        return None
    provider = TracerProvider(resource=resource(default_service))  # OTEL_TRACES_SAMPLER
    pairs = list(exporters) if exporters is not None else [(n, _exporter(n, env)) for n in names]
    for name, exporter in pairs:
        provider.add_span_processor(_processor(name, exporter))
    return provider


def instrument_libraries() -> None:
    """The maintained instrumentations of the clients the library uses (idempotent)."""
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    for instrumentor in (PsycopgInstrumentor(), RedisInstrumentor(), HTTPXClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()


def configure_tracing(default_service: str) -> bool:
    """Set up tracing in this process when the environment asks for it (once per process: a
    forked child sets up its own). Returns whether tracing is on."""
    if _state.get("pid") == os.getpid():
        return bool(_state.get("on"))
    provider = build_provider(default_service)
    _state.update(pid=os.getpid(), on=provider is not None)
    if provider is None:
        return False
    trace.set_tracer_provider(provider)
    _state["provider"] = provider
    instrument_libraries()
    log.info("tracing on: exporters %s", ", ".join(exporter_names()))
    return True


def tracing_on() -> bool:
    """Whether `configure_tracing` turned tracing on in this process."""
    return _state.get("pid") == os.getpid() and bool(_state.get("on"))


def flush(timeout_ms: int = 5000) -> None:
    """Export what this process's spans are waiting for (before a worker process exits)."""
    provider = _state.get("provider")
    if tracing_on() and isinstance(provider, TracerProvider):
        provider.force_flush(timeout_ms)


def instrument_fastapi(app: Any) -> None:
    """The FastAPI instrumentation on `app`: a server span per request (the API's root span
    of a commit's trace), when tracing is on."""
    if not tracing_on():
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics")


__all__ = [
    "ParentedClientSpans",
    "TracingConfigError",
    "build_provider",
    "configure_tracing",
    "exporter_names",
    "flush",
    "instrument_fastapi",
    "instrument_libraries",
    "one_line",
    "resource",
    "tracing_on",
    "tracing_requested",
]
