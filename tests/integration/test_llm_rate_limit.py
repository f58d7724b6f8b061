"""The OpenAI-compatible provider against a flaky server (429 + Retry-After to 30% of the
requests, malformed JSON to 10%), from four "workers" (threads, each with its own provider and
its own Redis connection, as four worker processes would have): every call ends with a valid
object, and the server never sees more requests in any window than the shared limit (a 2 s
window here, so the test is quick), nor more in flight than the concurrency cap."""

from __future__ import annotations

import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import SecretStr

from ctxpipe.core.config import Settings
from ctxpipe.core.models import ArchiveSummary
from ctxpipe.providers.base import LLMUsage
from ctxpipe.providers.llm_limits import LimitSpec
from ctxpipe.providers.llm_limits.redis_limiter import RedisLLMLimiter
from ctxpipe.providers.openai_llm import OpenAICompatibleLLM
from ctxpipe.providers.prompts import PromptRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _flaky_llm import FlakyLLMServer  # noqa: E402

WORKERS = 4
VARIABLES = {"messages": [], "tools": [], "session_id": "s1", "max_tokens": 100}


def run_calls(server: FlakyLLMServer, redis_url: str, spec: LimitSpec, calls: int) -> LLMUsage:
    settings = Settings(
        llm_provider="openai",
        llm_base_url=server.url,
        llm_api_key=SecretStr("sk-flaky"),
        llm_max_retries=3,
        llm_max_wait_s=30.0,
        redis_url=redis_url,
    )
    registry = PromptRegistry.load()
    scope = uuid.uuid4().hex[:12]
    limiters = [RedisLLMLimiter.from_url(redis_url, spec, scope=scope) for _ in range(WORKERS)]
    providers = [
        OpenAICompatibleLLM(settings, registry, retry_wait_s=0.05, limiter=lim) for lim in limiters
    ]
    usage = LLMUsage()

    def call(i: int) -> ArchiveSummary:
        return providers[i % WORKERS].complete_json_sync(
            "compression.archive_summary", VARIABLES, ArchiveSummary, usage=usage
        )

    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            results = list(pool.map(call, range(calls)))
    finally:
        snap = limiters[0].snapshot()
        for lim in limiters:
            lim.close()
    assert len(results) == calls and all(r.summary for r in results)
    assert snap.http_429 == server.tally.rate_limited > 0
    assert snap.retry_after_honoured == snap.http_429
    assert snap.deferred == 0
    return usage


def test_flaky_server_sees_no_more_than_the_limit_and_every_call_succeeds(
    redis_url: str,
) -> None:
    spec = LimitSpec(requests=6, window_s=2.0)
    with FlakyLLMServer(rate_limited=0.3, malformed=0.1, retry_after="1", seed=3) as server:
        usage = run_calls(server, redis_url, spec, calls=16)
    assert usage.failed == 0 and usage.calls == 16
    assert server.tally.malformed > 0 and usage.repaired + usage.retried > 0
    assert server.peak(2.0) <= 6
    assert len(server.tally.arrivals) > 16  # the 429s and the broken bodies were sent again


def test_concurrency_cap_holds_across_workers(redis_url: str) -> None:
    spec = LimitSpec(concurrency=2, window_s=60.0, lease_s=30.0)
    with FlakyLLMServer(rate_limited=0.1, malformed=0.0, latency_s=0.1, seed=5) as server:
        run_calls(server, redis_url, spec, calls=12)
    assert server.tally.peak_in_flight <= 2
