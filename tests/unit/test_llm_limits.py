"""The LLM limiter in one process (a clock the test moves), the gate's bounded wait, the
`Retry-After` header, the limiter's scope, and the provider against a scripted transport:
a 429 with `Retry-After` is waited out and costs no attempt; a wait over the bound hands the
call back with the delay; the Celery task turns that into a retry with that countdown."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from ctxpipe.commit.failures import TransientStepError, throttle_delay
from ctxpipe.core.config import Settings
from ctxpipe.core.errors import CommitError, LLMError, LLMThrottledError
from ctxpipe.core.models import ArchiveSummary
from ctxpipe.providers.llm_limits import (
    CallBudget,
    Decision,
    InProcessLLMLimiter,
    LimiterSnapshot,
    LimitSpec,
    LLMGate,
    limiter_scope,
    parse_retry_after,
)
from ctxpipe.providers.llm_limits.wiring import limit_spec
from ctxpipe.providers.openai_llm import OpenAICompatibleLLM
from ctxpipe.providers.prompts import PromptRegistry


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def limiter(clock: Clock, **spec: Any) -> InProcessLLMLimiter:
    return InProcessLLMLimiter(LimitSpec(**spec), clock=clock)


# ---------------------------------------------------------------- the in-process limiter
def test_requests_over_the_limit_wait_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    lim = limiter(clock, requests=3, window_s=60)
    for i in range(3):
        assert lim.acquire(f"r{i}", 10).granted
        clock.now += 1
        lim.release(f"r{i}", 10)  # the call took a second
        clock.now += 4
    denied = lim.acquire("r3", 10)
    assert (denied.granted, denied.reason) == (False, "requests")
    assert denied.wait_s == pytest.approx(46.0)  # the first call, ended 14 s ago
    clock.now += 46
    assert lim.acquire("r3", 10).granted
    assert lim.snapshot().requests_in_window == 3


def test_a_request_in_flight_counts_until_a_window_after_it_ends() -> None:
    """It reached the server at some moment before its reply: the window must cover it."""
    clock = Clock()
    lim = limiter(clock, requests=1, window_s=60, lease_s=300)
    assert lim.acquire("slow", 10).granted
    clock.now += 100  # a long call: granted 100 s ago, still in flight
    assert lim.acquire("next", 10) == Decision(False, 60.0, "requests")
    lim.release("slow", 10)
    clock.now += 59.9
    assert not lim.acquire("next", 10).granted
    clock.now += 0.2
    assert lim.acquire("next", 10).granted


def test_tokens_are_reserved_then_charged_what_the_reply_used() -> None:
    clock = Clock()
    lim = limiter(clock, tokens=1000, window_s=60)
    assert lim.acquire("a", 600).granted
    denied = lim.acquire("b", 600)
    assert (denied.granted, denied.reason, denied.wait_s) == (False, "tokens", 60.0)
    lim.release("a", 150)  # the reply said 150 tokens: the rest of the reservation returns
    assert lim.acquire("b", 600).granted
    assert lim.snapshot().tokens_in_window == 750
    lim.release("b", 2000)  # more than reserved: the debt delays what follows
    assert lim.acquire("c", 1).reason == "tokens"


def test_a_request_bigger_than_the_token_limit_goes_alone_in_an_empty_window() -> None:
    clock = Clock()
    lim = limiter(clock, tokens=100, window_s=60)
    assert lim.acquire("big", 500).granted
    assert lim.acquire("next", 1).reason == "tokens"
    clock.now += 60.01
    assert lim.acquire("next", 1).granted


def test_concurrency_slots_are_freed_by_release_or_by_their_lease() -> None:
    clock = Clock()
    lim = limiter(clock, concurrency=2, lease_s=90)
    assert lim.acquire("a", 1).granted and lim.acquire("b", 1).granted
    assert lim.acquire("c", 1).reason == "concurrency"
    lim.release("a", None)
    assert lim.acquire("c", 1).granted
    clock.now += 91  # b and c's holders died: their leases end
    assert lim.snapshot().in_flight == 0
    assert lim.acquire("d", 1).granted


def test_a_cool_down_stops_every_caller_and_only_grows() -> None:
    clock = Clock()
    lim = limiter(clock)
    lim.cool_down(10)
    lim.cool_down(2)  # a shorter Retry-After never shortens the one in force
    denied = lim.acquire("a", 1)
    assert (denied.reason, denied.wait_s) == ("retry-after", 10.0)
    clock.now += 10
    assert lim.acquire("a", 1).granted


def test_unknown_counter_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown limiter counter"):
        limiter(Clock()).count(throttles=1)


@pytest.mark.parametrize("field", ["requests", "tokens", "concurrency"])
def test_a_limit_below_one_is_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} must be at least 1"):
        LimitSpec(**{field: 0})


# ---------------------------------------------------------------- the gate
def test_the_gate_waits_within_its_bound_and_counts_the_wait() -> None:
    clock = Clock()
    lim = limiter(clock, requests=1, window_s=10)
    gate = LLMGate(lim, max_wait_s=30, sleep=clock.sleep, clock=clock)
    budget = CallBudget()
    gate.release(asyncio.run(gate.acquire(5, budget)), 5)
    asyncio.run(gate.acquire(5, budget))  # waited ~10 s for the window
    assert 10.0 <= budget.waited_s <= 10.3
    snap = lim.snapshot()
    assert (snap.throttled, snap.deferred) == (1, 0)
    assert snap.wait_seconds == pytest.approx(budget.waited_s)


def test_a_wait_over_the_bound_hands_the_call_back_with_the_delay() -> None:
    clock = Clock()
    lim = limiter(clock, requests=1, window_s=60)
    gate = LLMGate(lim, max_wait_s=5, sleep=clock.sleep, clock=clock)
    gate.release(asyncio.run(gate.acquire(5, CallBudget())), 5)
    started = clock.now
    with pytest.raises(LLMThrottledError) as err:
        asyncio.run(gate.acquire(5, CallBudget()))
    assert clock.now == started  # it did not sleep: the wait would have been over the bound
    assert err.value.retry_after_s == pytest.approx(60.0)
    assert err.value.transient and "1 requests per 60 s" in str(err.value)
    assert lim.snapshot().deferred == 1


# ---------------------------------------------------------------- Retry-After
def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == (
        30.0
    )
    assert parse_retry_after("Wed, 26 Nov 2026 12:00:45 GMT", now) == 45.0
    assert parse_retry_after("Wed, 26 Nov 2026 11:00:00 GMT", now) == 0.0  # in the past
    assert parse_retry_after("86400") == 3600.0  # capped at an hour
    for bad in (None, "", "soon", "-3", "nan", "inf"):
        assert parse_retry_after(bad) is None


# ---------------------------------------------------------------- the scope
def test_the_scope_holds_no_key_and_tells_keys_and_servers_apart() -> None:
    scope, label = limiter_scope("HTTPS://user:pw@API.example.com/v1/", "sk-secret-1")
    assert "sk-secret" not in scope + label and "pw" not in label
    assert label.startswith("https://api.example.com/v1 (key ")
    assert limiter_scope("https://api.example.com/v1", "sk-secret-1")[0] == scope
    assert limiter_scope("https://api.example.com/v1", "sk-secret-2")[0] != scope
    assert limiter_scope("https://other.example.com/v1", "sk-secret-1")[0] != scope


# ---------------------------------------------------------------- the rate window
def openai_settings(**values: Any) -> Settings:
    return Settings(llm_provider="openai", llm_base_url="http://llm.test/v1", **values)


def test_the_per_minute_limits_are_scaled_to_the_window() -> None:
    spec = limit_spec(
        openai_settings(
            llm_requests_per_minute=600, llm_tokens_per_minute=90_000, llm_rate_window_s=10
        )
    )
    assert (spec.requests, spec.tokens, spec.window_s) == (100, 15_000, 10.0)
    unscaled = limit_spec(openai_settings(llm_requests_per_minute=600))
    assert (unscaled.requests, unscaled.tokens, unscaled.window_s) == (600, None, 60.0)
    half = limit_spec(openai_settings(llm_tokens_per_minute=1000, llm_rate_window_s=30))
    assert (half.requests, half.tokens) == (None, 500)
    # a window over a minute would let a burst exceed the provider's per-minute limit
    with pytest.raises(ValidationError, match="less than or equal to 60"):
        openai_settings(llm_rate_window_s=90)


def test_scaling_rounds_down_so_the_rate_is_never_exceeded() -> None:
    spec = limit_spec(
        openai_settings(
            llm_requests_per_minute=100, llm_tokens_per_minute=1000, llm_rate_window_s=7
        )
    )
    assert (spec.requests, spec.tokens) == (11, 116)  # 11.67 and 116.67 a window
    assert (
        limit_spec(openai_settings(llm_requests_per_minute=6, llm_rate_window_s=10)).requests == 1
    )


def test_a_window_with_one_request_in_ten_seconds_is_allowed_and_enforced() -> None:
    clock = Clock()
    spec = limit_spec(openai_settings(llm_requests_per_minute=6, llm_rate_window_s=10))
    lim = InProcessLLMLimiter(spec, clock=clock)
    assert lim.acquire("a", 1).granted
    lim.release("a", 1)
    denied = lim.acquire("b", 1)
    assert (denied.granted, denied.reason) == (False, "requests")
    assert denied.wait_s == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("CTXPIPE_LLM_REQUESTS_PER_MINUTE", "5"), ("CTXPIPE_LLM_TOKENS_PER_MINUTE", "3")],
)
def test_a_limit_scaled_below_one_is_refused_at_load(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("CTXPIPE_LLM_RATE_WINDOW_S", "10")
    with pytest.raises(ValidationError) as err:
        Settings()
    message = str(err.value)
    assert f"{variable}={value}" in message
    assert "CTXPIPE_LLM_RATE_WINDOW_S=10 s allows less than 1" in message


def scaled_snapshot(**values: Any) -> LimiterSnapshot:
    spec = limit_spec(openai_settings(llm_max_concurrency=3, **values))
    lim = InProcessLLMLimiter(spec, clock=Clock())
    assert lim.acquire("a", 40).granted
    return lim.snapshot()


def test_status_names_the_window_of_each_figure() -> None:
    from ctxpipe.cli.status_cmds import throttling_line

    line = throttling_line(
        scaled_snapshot(
            llm_requests_per_minute=100, llm_tokens_per_minute=6000, llm_rate_window_s=10
        )
    )
    assert line.startswith(
        "requests 16 per 10 s (96/min), tokens 1000 per 10 s (6000/min), concurrency 3; "
        "last 10 s 1 requests / 40 tokens, 1 in flight;"
    )
    assert "rpm" not in line and "minute" not in line
    default = throttling_line(scaled_snapshot(llm_requests_per_minute=100))
    assert default.startswith("rpm 100, concurrency 3; last minute 1 requests / 40 tokens")


def test_metrics_give_per_minute_rates_and_per_window_limits() -> None:
    from ctxpipe.api.llm_metrics import throttling_metrics

    snap = scaled_snapshot(
        llm_requests_per_minute=100, llm_tokens_per_minute=6000, llm_rate_window_s=10
    )
    values = {m.name: m.samples[0].value for m in throttling_metrics(lambda: snap)}
    assert values["ctxpipe_llm_rate_window_seconds"] == 10
    assert values["ctxpipe_llm_requests_per_window_limit"] == 16
    assert values["ctxpipe_llm_requests_per_minute_limit"] == pytest.approx(96)  # rounded down
    assert values["ctxpipe_llm_tokens_per_window_limit"] == 1000
    assert values["ctxpipe_llm_tokens_per_minute_limit"] == pytest.approx(6000)
    assert values["ctxpipe_llm_requests_in_window"] == 1
    assert values["ctxpipe_llm_tokens_in_window"] == 40
    assert values["ctxpipe_llm_max_concurrency_limit"] == 3


# ---------------------------------------------------------------- the provider
def provider(
    replies: list[httpx.Response], sent: list[float], clock: Clock, **settings: Any
) -> tuple[OpenAICompatibleLLM, InProcessLLMLimiter]:
    lim = InProcessLLMLimiter(LimitSpec(), clock=clock)

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(clock.now)
        return replies.pop(0)

    cfg = Settings(
        llm_provider="openai",
        llm_base_url="http://llm.test/v1",
        llm_api_key=SecretStr("sk-test"),
        llm_max_retries=1,
        **settings,
    )
    llm = OpenAICompatibleLLM(
        cfg,
        PromptRegistry.load(),
        retry_wait_s=0.0,
        transport=httpx.MockTransport(handle),
        limiter=lim,
    )
    llm.gate._sleep = clock.sleep  # the test's clock moves instead of the wall clock
    llm.gate._clock = clock
    return llm, lim


def ok(content: str = '{"summary": "moved to Lisbon"}') -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
        },
    )


def throttled(retry_after: str) -> httpx.Response:
    return httpx.Response(429, text='{"error": "slow down"}', headers={"Retry-After": retry_after})


def summarise(llm: OpenAICompatibleLLM) -> ArchiveSummary:
    return llm.complete_json_sync(
        "compression.archive_summary",
        {"messages": [], "tools": [], "session_id": "s1", "max_tokens": 100},
        ArchiveSummary,
    )


def test_429_with_retry_after_is_waited_out_and_costs_no_attempt() -> None:
    clock, sent = Clock(), []
    replies = [throttled("3"), throttled("2"), throttled("1"), ok()]
    llm, lim = provider(replies, sent, clock)  # llm_max_retries=1: two attempts for failures
    assert summarise(llm).summary == "moved to Lisbon"
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    assert gaps[0] >= 3.0 and gaps[1] >= 2.0 and gaps[2] >= 1.0
    snap = lim.snapshot()
    assert (snap.http_429, snap.retry_after_honoured, snap.throttled) == (3, 3, 3)
    assert snap.tokens_in_window == 48  # the three refusals are charged nothing


def test_429_without_retry_after_still_counts_as_a_failed_attempt() -> None:
    clock, sent = Clock(), []
    replies = [httpx.Response(429, text="busy"), httpx.Response(429, text="busy")]
    llm, lim = provider(replies, sent, clock)
    with pytest.raises(LLMError, match="after 2 attempt"):
        summarise(llm)
    assert lim.snapshot().http_429 == 2 and lim.snapshot().retry_after_honoured == 0


def test_retry_after_over_the_bound_raises_throttled_with_its_delay() -> None:
    clock, sent = Clock(), []
    llm, lim = provider([throttled("120"), ok()], sent, clock, llm_max_wait_s=10)
    with pytest.raises(LLMThrottledError) as err:
        summarise(llm)
    assert len(sent) == 1  # nothing more was sent
    assert 119.0 <= err.value.retry_after_s <= 120.0
    assert lim.snapshot().deferred == 1


def test_a_throttled_call_is_found_along_the_cause_chain() -> None:
    throttled_exc = LLMThrottledError(12.5, "requests per 60 s reached")
    try:
        try:
            raise CommitError("archive failed", phase="archive") from throttled_exc
        except CommitError as commit_exc:
            raise TransientStepError("archive", throttled_exc) from commit_exc
    except TransientStepError as exc:
        assert throttle_delay(exc) == 12.5
    assert throttle_delay(TransientStepError("x", TimeoutError())) is None


def test_the_task_retries_a_throttled_step_after_its_delay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Celery wrapper gives the worker slot back: `self.retry(countdown=delay)`."""
    from celery.canvas import Signature
    from celery.exceptions import Retry

    from tasks.commit import CommitTask, archive

    class Ledger:
        def state(self, *_a: Any) -> Any:
            raise LLMThrottledError(42.0, "the server asked to wait (Retry-After)")

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(CommitTask, "ledger", lambda self: Ledger())
    monkeypatch.setattr(CommitTask, "components", lambda self: None)
    monkeypatch.setattr(Signature, "apply_async", lambda self, *a, **kw: sent.append(self.options))
    archive.push_request(id="task-1", retries=0, args=["c-1"], kwargs={}, called_directly=False)
    try:
        with pytest.raises(Retry) as err:
            archive.run("c-1")
    finally:
        archive.pop_request()
    assert err.value.when == 42.0
    assert sent and sent[0]["countdown"] == 42.0
