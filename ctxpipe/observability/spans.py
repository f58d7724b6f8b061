"""The hand spans of the library, on the OpenTelemetry API only (a no-op until a process sets
up the SDK: `observability.tracing`), and the commit id of the work in progress (for the log
lines, `observability.logs`).

- `phase_span`: a commit phase (`commit.archive`, `commit.extract`, `commit.plan`,
  `commit.write`, `commit.register`) with the commit id; the write is the GenAI memory
  operation `update_memory` and names the records (URIs) it wrote.
- `llm_span`: one LLM call, with the GenAI conventions (`gen_ai.operation.name` = `chat`,
  `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens` / `output_tokens`).
- `memory_span`: a read (`find`, `search`, `build_context`) as the GenAI memory operation
  `search_memory`: the store (the account), the owner, the number of hits and their record
  ids; the query text only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

tracer = trace.get_tracer("ctxpipe")

_commit_id: ContextVar[str | None] = ContextVar("ctxpipe_commit_id", default=None)

COMMIT_ID = "ctxpipe.commit.id"
PHASE = "ctxpipe.commit.phase"
OPERATION = "gen_ai.operation.name"
STORE_ID = "gen_ai.memory.store.id"
RECORD_ID = "gen_ai.memory.record.id"
QUERY_TEXT = "gen_ai.memory.query.text"
MAX_RECORD_IDS = 50  # a span names at most this many records (the count is always there)


def capture_content(env: Mapping[str, str] | None = None) -> bool:
    """Whether spans may carry query text (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`,
    the GenAI conventions' switch; off by default)."""
    env = os.environ if env is None else env
    value = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() in ("1", "true", "yes")


def current_commit_id() -> str | None:
    """The commit the running code works on (None outside a commit)."""
    return _commit_id.get()


@contextmanager
def commit_scope(commit_id: str | None) -> Iterator[None]:
    """Log lines written inside name `commit_id`."""
    token = _commit_id.set(commit_id)
    try:
        yield
    finally:
        _commit_id.reset(token)


@contextmanager
def phase_span(phase: str, commit_id: str, **attributes: Any) -> Iterator[Span]:
    """A span for one commit phase (an error raised inside is recorded on it)."""
    attrs = {COMMIT_ID: commit_id, PHASE: phase, **attributes}
    with commit_scope(commit_id), tracer.start_as_current_span(f"commit.{phase}") as span:
        span.set_attributes(attrs)
        yield span


def record_ids(span: Span, ids: Sequence[str]) -> None:
    """The records (URIs) an operation returned or wrote: their count, and the first ones."""
    span.set_attribute("ctxpipe.records", len(ids))
    if ids:
        span.set_attribute(RECORD_ID, list(ids[:MAX_RECORD_IDS]))


@contextmanager
def llm_span(provider: str, model: str, prompt_id: str) -> Iterator[Span]:
    """A client span for one LLM call (`chat {model}`), GenAI conventions."""
    attrs = {
        OPERATION: "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the name older backends read
        "gen_ai.request.model": model,
        "gen_ai.output.type": "json",
        "ctxpipe.prompt_id": prompt_id,
    }
    with tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT) as span:
        span.set_attributes(attrs)
        yield span


def llm_usage(span: Span, input_tokens: int, output_tokens: int) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", output_tokens)


@contextmanager
def memory_span(
    kind: str, account_id: str, *, owner: str = "", query: str | None = None, **attributes: Any
) -> Iterator[Span]:
    """A read of the memory (`search_memory {kind}`), GenAI memory conventions. `query` is
    recorded only when content capture is on (it can hold personal data)."""
    attrs: dict[str, Any] = {OPERATION: "search_memory", STORE_ID: account_id, **attributes}
    if owner:
        attrs["ctxpipe.owner"] = owner
    if query is not None and capture_content():
        attrs[QUERY_TEXT] = query
    with tracer.start_as_current_span(f"search_memory {kind}") as span:
        span.set_attributes(attrs)
        yield span


__all__ = [
    "capture_content",
    "commit_scope",
    "current_commit_id",
    "llm_span",
    "llm_usage",
    "memory_span",
    "phase_span",
    "record_ids",
    "tracer",
]
