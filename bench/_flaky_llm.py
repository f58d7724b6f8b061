"""A small OpenAI-compatible chat-completions server for the rate-limit benchmark and its
integration test: it answers a share of the requests with HTTP 429 + `Retry-After`, another
share with malformed JSON (half a reply the client repairs: fences, single quotes, a trailing
comma; half a body cut short, which the client must ask again), the rest with a valid object
of the schema the request names. It records when every request arrived, so a test or the
benchmark can check the most requests it saw in any window.

    with FlakyLLMServer(rate_limited=0.3, malformed=0.1) as srv:
        ... Settings(llm_base_url=srv.url, ...) ...
        srv.peak(60.0)
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


@dataclass
class Tally:
    arrivals: list[float] = field(default_factory=list)
    rate_limited: int = 0
    malformed: int = 0
    ok: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


def minimal_instance(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """A small valid value of a JSON schema (pydantic's: `$ref`/`$defs`, `anyOf`, enums)."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return minimal_instance(root.get("$defs", {})[name], root)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return minimal_instance(options[0], root)
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        wanted = list(schema.get("required", [])) or list(props)[:1]
        return {k: minimal_instance(props[k], root) for k in wanted if k in props}
    if kind == "array":
        return []
    if kind == "string":
        return "a short summary of the session"
    if kind in ("integer", "number"):
        return max(schema.get("minimum", 0), 0)
    if kind == "boolean":
        return False
    return None


class FlakyLLMServer:
    def __init__(
        self,
        *,
        rate_limited: float = 0.3,
        malformed: float = 0.1,
        retry_after: str = "1",
        latency_s: float = 0.02,
        seed: int = 7,
    ) -> None:
        self.rate_limited = rate_limited
        self.malformed = malformed
        self.retry_after = retry_after
        self.latency_s = latency_s
        self.tally = Tally()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,))
        self._thread.daemon = True

    def __enter__(self) -> FlakyLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def peak(self, window_s: float) -> int:
        """The most requests that arrived within any `window_s` seconds."""
        with self._lock:
            times = sorted(self.tally.arrivals)
        best, inside = 0, deque[float]()
        for t in times:
            inside.append(t)
            while inside[0] <= t - window_s:
                inside.popleft()
            best = max(best, len(inside))
        return best

    # ------------------------------------------------------------------ internals
    def _pick(self) -> str:
        with self._lock:
            self.tally.arrivals.append(time.monotonic())
            self.tally.in_flight += 1
            self.tally.peak_in_flight = max(self.tally.peak_in_flight, self.tally.in_flight)
            roll = self._rng.random()
            if roll < self.rate_limited:
                self.tally.rate_limited += 1
                return "429"
            if roll < self.rate_limited + self.malformed:
                self.tally.malformed += 1
                return "repairable" if self._rng.random() < 0.5 else "truncated"
            self.tally.ok += 1
            return "ok"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kind = server._pick()
                try:
                    if server.latency_s:
                        time.sleep(server.latency_s)
                    self._answer(kind, json.loads(raw))
                finally:
                    with server._lock:
                        server.tally.in_flight -= 1

            def _answer(self, kind: str, payload: dict[str, Any]) -> None:
                if kind == "429":
                    self._send(
                        429,
                        '{"error": {"message": "rate limit reached", "type": "requests"}}',
                        {"Retry-After": server.retry_after},
                    )
                    return
                fmt = payload.get("response_format") or {}
                schema = (fmt.get("json_schema") or {}).get("schema") or {}
                obj = minimal_instance(schema) if schema else {}
                content = json.dumps(obj)
                if kind == "repairable":
                    content = "```json\n" + content.replace('"', "'")[:-1] + ",}\n```"
                body = json.dumps(
                    {
                        "id": "cmpl-flaky",
                        "object": "chat.completion",
                        "model": payload.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": 120,
                            "completion_tokens": 30,
                            "total_tokens": 150,
                        },
                    }
                )
                if kind == "truncated":
                    body = body[: len(body) // 2]
                self._send(200, body)

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler
