"""OpenAICompatibleLLM against a real chat-completions server on 127.0.0.1 (scripted replies)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import SecretStr

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import LLMError, PromptError
from ctxpipe.core.llm_schemas import ExtractionOutput, MergeOutput
from ctxpipe.core.models import ArchiveSummary
from ctxpipe.core.session import RequestContext
from ctxpipe.providers.base import LLM, LLMUsage
from ctxpipe.providers.openai_llm import OpenAICompatibleLLM
from ctxpipe.providers.prompts import PromptRegistry


@dataclass
class Reply:
    status: int = 200
    content: str | None = None  # assistant message content
    body: str | None = None  # raw body (overrides content)
    finish_reason: str = "stop"
    delay: float = 0.0
    usage: tuple[int, int] = (100, 20)


@dataclass
class FakeServer:
    url: str
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, payload: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self.lock:
            self.requests.append(payload)
            self.headers.append(headers)
            if not self.script:
                return Reply(status=500, body='{"error": "script exhausted"}')
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            if self.path != "/v1/chat/completions":
                self._send(404, '{"error": "not found"}')
                return
            payload = json.loads(raw)
            reply = server.next_reply(payload, {k.lower(): v for k, v in self.headers.items()})
            if reply.delay:
                time.sleep(reply.delay)
            if reply.body is not None:
                self._send(reply.status, reply.body)
                return
            body = {
                "id": "cmpl-1",
                "object": "chat.completion",
                "model": payload.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": reply.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": reply.usage[0],
                    "completion_tokens": reply.usage[1],
                    "total_tokens": sum(reply.usage),
                },
            }
            self._send(reply.status, json.dumps(body))

        def _send(self, status: int, body: str) -> None:
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout test)
                pass

    return Handler


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def registry() -> PromptRegistry:
    return PromptRegistry.load()


def make_llm(server: FakeServer, registry: PromptRegistry, **overrides: Any) -> OpenAICompatibleLLM:
    settings = Settings(
        llm_provider="openai",
        llm_base_url=server.url,
        llm_model="test-model",
        llm_api_key=SecretStr("sk-test"),
        llm_max_retries=overrides.pop("retries", 2),
        llm_timeout_s=overrides.pop("timeout", 5.0),
    )
    return OpenAICompatibleLLM(settings, registry, retry_wait_s=0.001, retry_wait_max_s=0.01)


MESSAGES = [
    {"id": "msg-a1", "role": "user", "name": None, "content": "I prefer tabs.", "created_at": None},
    {"id": "msg-a2", "role": "assistant", "name": None, "content": "Noted.", "created_at": None},
]
ARCHIVE_VARS = {"messages": MESSAGES, "tools": [], "session_id": "s-1", "max_tokens": 200}
VALID_SUMMARY = json.dumps(
    {"summary": "User prefers tabs.", "key_topics": ["indentation"], "key_decisions": []}
)


def test_satisfies_protocol(server: FakeServer, registry: PromptRegistry) -> None:
    llm = make_llm(server, registry)
    assert isinstance(llm, LLM)
    assert llm.name == "openai"


def test_valid_output(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [Reply(content=VALID_SUMMARY, usage=(120, 30))]
    llm = make_llm(server, registry)
    usage = LLMUsage()
    ctx = RequestContext(account_id="acme", user_id="u1", session_id="s-1")
    out = llm.complete_json_sync(
        "compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, ctx, usage
    )
    assert out == ArchiveSummary(summary="User prefers tabs.", key_topics=["indentation"])
    assert usage == LLMUsage(calls=1, prompt_tokens=120, completion_tokens=30, retries=0)

    (req,) = server.requests
    assert req["model"] == "test-model"
    assert req["temperature"] == 0.0
    rf = req["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "compression_archive_summary"
    assert rf["json_schema"]["schema"] == ArchiveSummary.model_json_schema()
    assert rf["json_schema"]["strict"] is False
    system, user = req["messages"]
    assert system["role"] == "system" and "JSON" in system["content"]
    assert user["role"] == "user"
    assert "[msg-a1] user: I prefer tabs." in user["content"]
    assert "[msg-a2] assistant: Noted." in user["content"]
    headers = server.headers[0]
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["x-request-id"] == ctx.trace_id


def test_async_api_and_fenced_output(server: FakeServer, registry: PromptRegistry) -> None:
    fenced = "```json\n" + VALID_SUMMARY + "\n```"
    server.script = [Reply(content=fenced)]
    llm = make_llm(server, registry)
    usage = LLMUsage()
    out = asyncio.run(
        llm.complete_json("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, None, usage)
    )
    assert out.summary == "User prefers tabs."
    assert len(server.requests) == 1
    assert (usage.repaired, usage.retried, usage.failed, usage.retries) == (1, 0, 0, 0)


def test_prose_and_trailing_comma_repaired_without_retry(
    server: FakeServer, registry: PromptRegistry
) -> None:
    reply = "Here is the JSON:\n{'summary': 'User prefers tabs.', 'key_topics': ['tabs',],}\nDone."
    server.script = [Reply(content=reply), Reply(status=500, body='{"error": "not asked"}')]
    usage = LLMUsage()
    out = make_llm(server, registry).complete_json_sync(
        "compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, usage=usage
    )
    assert out == ArchiveSummary(summary="User prefers tabs.", key_topics=["tabs"])
    assert len(server.requests) == 1
    assert (usage.repaired, usage.retried, usage.failed) == (1, 0, 0)


def test_schema_violation_fails_after_retries(server: FakeServer, registry: PromptRegistry) -> None:
    bad = json.dumps({"memories": [{"category": "no-such-category", "abstract": "x"}]})
    server.script = [Reply(content=bad)]
    llm = make_llm(server, registry, retries=2)
    usage = LLMUsage()
    variables = {
        "messages": MESSAGES,
        "summary": "",
        "key_topics": [],
        "tools": [],
        "user_id": "u1",
        "agent_id": "a1",
        "session_time": None,
    }
    with pytest.raises(LLMError) as info:
        llm.complete_json_sync("extraction.preferences", variables, ExtractionOutput, usage=usage)
    msg = str(info.value)
    assert "extraction.preferences" in msg
    assert "3 attempt(s)" in msg
    assert "does not match schema ExtractionOutput" in msg
    assert info.value.transient is False
    assert len(server.requests) == 3
    assert usage.calls == 1 and usage.retries == 2 and usage.prompt_tokens == 300
    assert (usage.repaired, usage.retried, usage.failed) == (0, 2, 1)


def test_garbage_then_valid_is_retried(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [
        Reply(content="Sure! Here is the summary: {summary: oops"),
        Reply(content=VALID_SUMMARY),
    ]
    llm = make_llm(server, registry)
    usage = LLMUsage()
    out = llm.complete_json_sync(
        "compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, usage=usage
    )
    assert out.summary == "User prefers tabs."
    assert len(server.requests) == 2
    assert usage.calls == 1 and usage.retries == 1
    assert usage.prompt_tokens == 200 and usage.completion_tokens == 40
    # "{summary: oops" is cut inside a bare word: refused by the repair, so asked again
    assert (usage.repaired, usage.retried, usage.failed) == (0, 1, 0)


def test_always_garbage_fails_clearly(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [Reply(content="I cannot produce JSON today.")]
    llm = make_llm(server, registry, retries=1)
    with pytest.raises(LLMError, match=r"'compression.archive_summary' failed after 2 attempt"):
        llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary)
    assert len(server.requests) == 2


def test_truncated_output_is_retried(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [
        Reply(content=VALID_SUMMARY[:20], finish_reason="length"),
        Reply(content=VALID_SUMMARY),
    ]
    llm = make_llm(server, registry)
    usage = LLMUsage()
    llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, usage=usage)
    assert usage.retries == 1
    # a reply the server says hit the token limit is asked again, not repaired
    assert (usage.repaired, usage.retried) == (0, 1)


def test_json_schema_rejected_falls_back_to_json_object(
    server: FakeServer, registry: PromptRegistry
) -> None:
    rejection = json.dumps(
        {"error": {"message": "response_format 'json_schema' is not supported", "type": "bad"}}
    )
    server.script = [
        Reply(status=400, body=rejection),
        Reply(content=VALID_SUMMARY),
        Reply(content=VALID_SUMMARY),
    ]
    llm = make_llm(server, registry)
    usage = LLMUsage()
    llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, usage=usage)
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object"]
    assert usage.retries == 0  # a format fallback is not a retry
    assert llm.response_format_mode == "json_object"
    # the fallback mode shows the schema in the system prompt
    assert '"summary"' in server.requests[1]["messages"][0]["content"]
    # remembered for the next call
    llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary)
    assert server.requests[2]["response_format"] == {"type": "json_object"}


def test_server_without_response_format_support(
    server: FakeServer, registry: PromptRegistry
) -> None:
    rejection = '{"error": "unsupported parameter: response_format"}'
    server.script = [
        Reply(status=400, body=rejection),
        Reply(status=400, body=rejection),
        Reply(content=VALID_SUMMARY),
    ]
    llm = make_llm(server, registry)
    llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary)
    kinds = [r.get("response_format", {}).get("type") for r in server.requests]
    assert kinds == ["json_schema", "json_object", None]
    assert llm.response_format_mode == "none"


def test_http_500_then_valid(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [
        Reply(status=500, body='{"error": "overloaded"}'),
        Reply(content=VALID_SUMMARY),
    ]
    llm = make_llm(server, registry)
    usage = LLMUsage()
    out = llm.complete_json_sync(
        "compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, usage=usage
    )
    assert out.summary == "User prefers tabs."
    assert usage.retries == 1 and len(server.requests) == 2
    assert usage.retried == 0  # an infrastructure retry, not bad output


def test_http_429_exhausted_is_transient(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [Reply(status=429, body='{"error": "rate limited"}')]
    llm = make_llm(server, registry, retries=1)
    usage = LLMUsage()
    with pytest.raises(LLMError, match="HTTP 429") as info:
        llm.complete_json_sync(
            "compression.archive_summary", ARCHIVE_VARS, ArchiveSummary, usage=usage
        )
    assert info.value.transient is True
    assert len(server.requests) == 2
    assert (usage.retries, usage.retried, usage.failed) == (1, 0, 1)


def test_http_401_is_not_retried(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [Reply(status=401, body='{"error": "invalid api key"}')]
    llm = make_llm(server, registry)
    with pytest.raises(LLMError, match="HTTP 401.*invalid api key"):
        llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary)
    assert len(server.requests) == 1


def test_slow_server_times_out(server: FakeServer, registry: PromptRegistry) -> None:
    server.script = [Reply(content=VALID_SUMMARY, delay=1.5)]
    llm = make_llm(server, registry, retries=1, timeout=0.1)
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"timed out after 0.1s") as info:
        llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary)
    assert time.monotonic() - started < 1.4
    assert info.value.transient is True
    assert len(server.requests) == 2


def test_connection_refused(registry: PromptRegistry) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(llm_base_url=f"http://127.0.0.1:{port}/v1", llm_max_retries=1)
    llm = OpenAICompatibleLLM(settings, registry, retry_wait_s=0.001, retry_wait_max_s=0.01)
    with pytest.raises(LLMError, match="connection error") as info:
        llm.complete_json_sync("compression.archive_summary", ARCHIVE_VARS, ArchiveSummary)
    assert info.value.transient is True


def test_missing_variable_is_prompt_error_without_request(
    server: FakeServer, registry: PromptRegistry
) -> None:
    llm = make_llm(server, registry)
    with pytest.raises(PromptError, match="new_content"):
        llm.complete_json_sync("policy.merge_bundle", {"category": "preferences"}, MergeOutput)
    assert server.requests == []


def test_factory_builds_openai(server: FakeServer, registry: PromptRegistry) -> None:
    from ctxpipe.providers.factory import make_llm as factory_make_llm

    settings = Settings(llm_provider="openai", llm_base_url=server.url)
    llm = factory_make_llm(settings, registry)
    assert isinstance(llm, OpenAICompatibleLLM) and llm.registry is registry
    assert isinstance(factory_make_llm(settings), OpenAICompatibleLLM)  # default registry
