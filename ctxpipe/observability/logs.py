"""Log lines people can read: one line per event, with the commit id and the trace id.

    2026-11-26T17:02:03.123Z WARNING ctxpipe.commit.phases commit=c-42
        trace=4bf92f3577b34da6a3ce929d0e0e4736 span=00f067aa0ba902b7 | a skipped candidate: …

(one line in the log; wrapped here)

`TraceContextFilter` adds `commit_id` (the commit the code works on:
`observability.spans.commit_scope`), `trace_id` and `span_id` (the current OpenTelemetry
span; `-` when there is none, as when tracing is off) to every record; `OneLineFormatter`
writes the record, its traceback included, on one line (line breaks become `\\n`). The Celery
workers (`tasks.telemetry`), the API (`uvicorn_log_config`) and the command
(`configure_logging`) use them.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO, Any

from opentelemetry import trace

from ctxpipe.observability.spans import current_commit_id

FORMAT = (
    "%(asctime)s %(levelname)s %(name)s commit=%(commit_id)s trace=%(trace_id)s "
    "span=%(span_id)s | %(message)s"
)
NONE = "-"


class TraceContextFilter(logging.Filter):
    """Adds `commit_id`, `trace_id` and `span_id` to a record (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else NONE
        record.span_id = format(ctx.span_id, "016x") if ctx.is_valid else NONE
        if not getattr(record, "commit_id", None):
            record.commit_id = current_commit_id() or NONE
        return True


class OneLineFormatter(logging.Formatter):
    """`FORMAT` (or `fmt`) in UTC, ISO 8601 with milliseconds; the whole record on one line."""

    _fields = TraceContextFilter()

    def __init__(self, fmt: str | None = None, **kwargs: Any) -> None:
        super().__init__(fmt or FORMAT, **kwargs)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        stamp = time.strftime(datefmt or "%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "trace_id"):  # a handler without the filter
            self._fields.filter(record)
        text = super().format(record)
        return text.replace("\r\n", "\n").replace("\n", "\\n")


def install(handler: logging.Handler) -> None:
    """Our filter and formatter on `handler` (idempotent)."""
    if not any(isinstance(f, TraceContextFilter) for f in handler.filters):
        handler.addFilter(TraceContextFilter())
    handler.setFormatter(OneLineFormatter())


def configure_logging(level: int | str = logging.WARNING, stream: IO[str] | None = None) -> None:
    """A process's log lines on `stream` (stderr) in our format, unless the root logger has
    handlers already (an embedding application's own configuration stands)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    install(handler)
    root.addHandler(handler)
    root.setLevel(level)


def uvicorn_log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's `log_config`: its loggers and ours through one handler in our format."""
    lvl = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"trace": {"()": f"{__name__}.TraceContextFilter"}},
        "formatters": {"line": {"()": f"{__name__}.OneLineFormatter"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "line",
                "filters": ["trace"],
            }
        },
        "root": {"handlers": ["stderr"], "level": lvl},
        "loggers": {
            "uvicorn": {"level": lvl},
            "uvicorn.error": {"level": lvl},
            "uvicorn.access": {"level": lvl},
        },
    }


__all__ = [
    "FORMAT",
    "OneLineFormatter",
    "TraceContextFilter",
    "configure_logging",
    "install",
    "uvicorn_log_config",
]
