"""OpenAI-compatible chat-completions LLM with JSON-schema output (OpenAI, vLLM, Ollama,
llama.cpp server, ...).

One `complete_json` call = one rendered prompt, up to `1 + settings.llm_max_retries` HTTP
attempts. A reply that is not strict JSON is first repaired locally
(`ctxpipe.providers.structured_output`: fences, prose, trailing commas, single quotes, ...) and
validated against the schema. Retried (exponential backoff with full jitter): timeouts,
connection errors, HTTP 429 and 5xx, and output that even repaired holds no valid object, or is
truncated (`finish_reason == "length"`). `LLMUsage` counts the calls `repaired`, the attempts
`retried` for bad output and the calls `failed`. Other HTTP errors (401, 404, a 400 not about
`response_format`) fail at once. When the server rejects `response_format: json_schema`, the
instance falls back to `json_object` (and then to no `response_format`) and remembers that for
later calls.

Every HTTP attempt first takes a permit of the provider's limiter (`ctxpipe.providers.llm_limits`:
requests and tokens per minute, the cap on calls in flight, shared through Redis by every
worker). A 429 or 503 with `Retry-After` makes every caller of the same base URL and key wait
that long, and costs no attempt: the wait is bounded instead (`llm_max_wait_s` per call, limits
and `Retry-After` together). A call that would wait longer raises `LLMThrottledError` carrying
the wait, before sending anything more, so its task can give the worker slot back.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import ssl
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_random_exponential,
)

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import LLMError, LLMThrottledError, Picklable
from ctxpipe.core.session import RequestContext
from ctxpipe.providers.base import LLMUsage, run_sync
from ctxpipe.providers.llm_limits import (
    CallBudget,
    LLMGate,
    LLMLimiter,
    estimate_tokens,
    parse_retry_after,
)
from ctxpipe.providers.prompts import PromptRegistry, default_registry
from ctxpipe.providers.structured_output import OutputRefused, parse_reply

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
ResponseFormatMode = Literal["json_schema", "json_object", "none"]


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CA bundle, SSL_CERT_FILE/SSL_CERT_DIR honoured),
    built once per process: building one loads the CA bundle (some 25 ms of CPU), and
    `_client` makes a client per call. An SSLContext is safe to share between clients."""
    return httpx.create_ssl_context()


SYSTEM_PROMPT = "You are a precise assistant. Reply with JSON only: one JSON object, no prose."
_BODY_SNIPPET = 300


class _RetryableError(Picklable):
    """One failed attempt that is worth retrying. `transient`: infrastructure, not output."""

    def __init__(self, message: str, *, transient: bool) -> None:
        self.transient = transient
        super().__init__(message)


class _ServerThrottled(_RetryableError):
    """HTTP 429/503 with `Retry-After`: the gate waits it out; it costs no attempt."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message, transient=True)


class _Attempts:
    """Tenacity's stop and wait for one call: `attempts` failures that are not a server's
    throttling, or `throttled_cap` throttled answers (a server that keeps saying
    `Retry-After: 0`); no wait of our own after a
    `Retry-After` (the gate waits it out), exponential backoff with full jitter otherwise."""

    def __init__(self, attempts: int, backoff: wait_random_exponential) -> None:
        self.attempts = attempts
        self.throttled_cap = attempts * 10
        self.failures = 0
        self.throttled = 0
        self._backoff = backoff

    def stop(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _ServerThrottled):
            self.throttled += 1
        else:
            self.failures += 1
        return self.failures >= self.attempts or self.throttled >= self.throttled_cap

    def wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return 0.0 if isinstance(exc, _ServerThrottled) else float(self._backoff(state))


class _FormatRejected(Exception):
    """HTTP 400 about `response_format`: switch to the next mode and resend at once."""


def _schema_name(prompt_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", prompt_id)[:64] or "output"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _BODY_SNIPPET else text[:_BODY_SNIPPET] + "..."


class OpenAICompatibleLLM:
    """`LLM` protocol over `POST {base_url}/chat/completions`."""

    name = "openai"

    def __init__(
        self,
        settings: Settings,
        registry: PromptRegistry | None = None,
        *,
        retry_wait_s: float = 0.5,
        retry_wait_max_s: float = 8.0,
        transport: httpx.AsyncBaseTransport | None = None,
        limiter: LLMLimiter | None = None,
    ) -> None:
        """`limiter`: default, the settings' limiter on Redis (`llm_limits.wiring`)."""
        self._settings = settings
        self._registry = registry if registry is not None else default_registry()
        self._url = settings.llm_base_url.rstrip("/") + "/chat/completions"
        self._model = settings.llm_model
        self._timeout = settings.llm_timeout_s
        self._attempts = settings.llm_max_retries + 1
        self._wait_s = retry_wait_s
        self._wait_max_s = retry_wait_max_s
        self._transport = transport
        if limiter is None:
            from ctxpipe.providers.llm_limits.wiring import llm_limiter

            limiter = llm_limiter(settings)
        self.gate = LLMGate(limiter, max_wait_s=settings.llm_max_wait_s)
        self.response_format_mode: ResponseFormatMode = "json_schema"

    @property
    def registry(self) -> PromptRegistry:
        return self._registry

    # ---------------------------------------------------------------- public API
    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        prompt = self._registry.render(prompt_id, variables)  # PromptError is not retried
        call_usage = LLMUsage(calls=1)
        attempts = 0
        budget = CallBudget()
        policy = _Attempts(
            self._attempts,
            wait_random_exponential(multiplier=self._wait_s, max=self._wait_max_s),
        )
        retryer = AsyncRetrying(
            stop=policy.stop,
            wait=policy.wait,
            retry=retry_if_exception_type(_RetryableError),
            before_sleep=lambda state: self._before_retry(prompt_id, state, call_usage),
            reraise=True,
        )
        try:
            async with self._client() as client:
                async for attempt in retryer:
                    with attempt:
                        attempts = attempt.retry_state.attempt_number
                        return await self._attempt(
                            client, prompt_id, prompt, schema, ctx, call_usage, budget
                        )
        except LLMThrottledError:  # not failed: to be sent again after the wait it carries
            raise
        except LLMError as exc:
            call_usage.failed = 1
            raise LLMError(
                f"LLM prompt {prompt_id!r} failed on attempt {attempts}: {exc}",
                transient=exc.transient,
            ) from exc
        except _RetryableError as exc:
            call_usage.failed = 1
            raise LLMError(
                f"LLM prompt {prompt_id!r} failed after {attempts} attempt(s) against "
                f"{self._url} (model {self._model}): {exc}",
                transient=exc.transient,
            ) from exc
        finally:
            call_usage.retries = max(0, attempts - 1)
            if usage is not None:
                usage.add(call_usage)
        raise AssertionError("unreachable")  # pragma: no cover

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        result: T = run_sync(self.complete_json(prompt_id, variables, schema, ctx, usage))
        return result

    # ---------------------------------------------------------------- internals
    def _client(self) -> httpx.AsyncClient:
        # a client per call: `complete_json_sync` runs each call on a fresh event loop
        headers = {"Content-Type": "application/json"}
        key = self._settings.llm_api_key.get_secret_value()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout),
            headers=headers,
            transport=self._transport,
            verify=_ssl_context(),
        )

    def _before_retry(self, prompt_id: str, state: RetryCallState, usage: LLMUsage) -> None:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _ServerThrottled):
            log.info("LLM prompt %s throttled by the server, waiting: %s", prompt_id, exc)
            return
        if isinstance(exc, _RetryableError) and not exc.transient:
            usage.retried += 1  # the output, not the infrastructure
        log.warning(
            "LLM prompt %s attempt %d/%d failed, retrying: %s",
            prompt_id,
            state.attempt_number,
            self._attempts,
            exc,
        )

    def _payload(self, prompt_id: str, prompt: str, schema: type[BaseModel]) -> dict[str, Any]:
        system = SYSTEM_PROMPT
        if self.response_format_mode != "json_schema":
            # without server-side schema enforcement, show the model the schema itself
            system += "\nThe object must match this JSON schema:\n" + json.dumps(
                schema.model_json_schema(), ensure_ascii=False
            )
        payload: dict[str, Any] = {
            "model": self._model,
            "temperature": self._settings.llm_temperature,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": prompt},
            ],
        }
        if self.response_format_mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(prompt_id),
                    "schema": schema.model_json_schema(),
                    "strict": False,
                },
            }
        elif self.response_format_mode == "json_object":
            payload["response_format"] = {"type": "json_object"}
        return payload

    async def _attempt(
        self,
        client: httpx.AsyncClient,
        prompt_id: str,
        prompt: str,
        schema: type[T],
        ctx: RequestContext | None,
        usage: LLMUsage,
        budget: CallBudget,
    ) -> T:
        while True:
            payload = self._payload(prompt_id, prompt, schema)
            tokens = estimate_tokens(json.dumps(payload["messages"], ensure_ascii=False))
            permit = await self.gate.acquire(tokens, budget)
            used: int | None = None
            try:
                body = await self._post(client, payload, ctx)
                used = _used_tokens(body)
            except _ServerThrottled:
                used = 0  # refused: the server counted no tokens
                raise
            except _FormatRejected as exc:
                previous = self.response_format_mode
                self.response_format_mode = "json_object" if previous == "json_schema" else "none"
                log.warning(
                    "LLM server %s rejected response_format %s (%s); using %s from now on",
                    self._url,
                    previous,
                    exc,
                    self.response_format_mode,
                )
                continue
            finally:
                self.gate.release(permit, used)
            return self._parse(body, schema, usage)

    async def _post(
        self, client: httpx.AsyncClient, payload: dict[str, Any], ctx: RequestContext | None
    ) -> dict[str, Any]:
        headers = {"X-Request-ID": ctx.trace_id} if ctx is not None else None
        try:
            resp = await client.post(self._url, json=payload, headers=headers)
        except httpx.TimeoutException as exc:
            raise _RetryableError(
                f"timed out after {self._timeout:g}s ({type(exc).__name__})", transient=True
            ) from exc
        except httpx.TransportError as exc:
            raise _RetryableError(
                f"connection error: {type(exc).__name__}: {exc}", transient=True
            ) from exc

        if resp.status_code == 429 or resp.status_code >= 500:
            retry_after = None
            if resp.status_code in (429, 503):
                retry_after = parse_retry_after(resp.headers.get("retry-after"))
                self.gate.server_throttled(resp.status_code, retry_after)
            message = f"HTTP {resp.status_code}: {_snippet(resp.text)}"
            if retry_after is not None:
                raise _ServerThrottled(f"{message} (Retry-After {retry_after:g}s)", retry_after)
            raise _RetryableError(message, transient=True)
        if resp.status_code in (400, 422) and "response_format" in resp.text:
            if self.response_format_mode != "none":
                raise _FormatRejected(_snippet(resp.text))
        if resp.status_code >= 400:
            raise LLMError(
                f"LLM server {self._url} refused the request with HTTP {resp.status_code}: "
                f"{_snippet(resp.text)}"
            )
        try:
            body = resp.json()
        except ValueError as exc:
            raise _RetryableError(
                f"response is not JSON: {_snippet(resp.text)}", transient=True
            ) from exc
        if not isinstance(body, dict):
            raise _RetryableError(
                f"unexpected response body: {_snippet(resp.text)}", transient=True
            )
        return body

    @staticmethod
    def _parse(body: dict[str, Any], schema: type[T], usage: LLMUsage) -> T:
        tokens = body.get("usage") or {}
        if isinstance(tokens, dict):
            usage.prompt_tokens += int(tokens.get("prompt_tokens") or 0)
            usage.completion_tokens += int(tokens.get("completion_tokens") or 0)
        try:
            choice = body["choices"][0]
            message = choice.get("message") or {}
            content = message.get("content")
            finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise _RetryableError(
                f"malformed chat-completions response: {_snippet(json.dumps(body))}",
                transient=False,
            ) from exc
        if finish == "length":
            raise _RetryableError(
                "output truncated (finish_reason=length); the reply hit the token limit",
                transient=False,
            )
        if not isinstance(content, str) or not content.strip():
            refusal = message.get("refusal")
            why = f"refusal: {_snippet(str(refusal))}" if refusal else "empty message content"
            raise _RetryableError(why, transient=False)
        try:
            parsed = parse_reply(content, schema)
        except OutputRefused as exc:
            raise _RetryableError(
                f"output {exc}; output was: {_snippet(content)}", transient=False
            ) from exc
        if parsed.repaired:
            usage.repaired = 1
            log.debug("LLM output repaired into %s: %s", schema.__name__, _snippet(content))
        return parsed.value


def _used_tokens(body: dict[str, Any]) -> int | None:
    """The tokens a reply says it used (None: it does not say)."""
    tokens = body.get("usage")
    if not isinstance(tokens, dict):
        return None
    total = tokens.get("total_tokens")
    if isinstance(total, int) and total >= 0:
        return total
    parts = [tokens.get("prompt_tokens"), tokens.get("completion_tokens")]
    if not any(isinstance(p, int) for p in parts):
        return None
    return sum(p for p in parts if isinstance(p, int))
