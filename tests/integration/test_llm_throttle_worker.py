"""A throttled LLM call on a real Celery worker: the commit tasks (`tasks.commit`) on an
in-process worker (`celery.contrib.pytest`'s `celery_worker`) against the suite's Redis and
PostgreSQL, the OpenAI-compatible provider against a local test server, and a shared limit of
2 requests per window counted in Redis. A call that finds the window full does not wait in its
worker (`llm_max_wait_s=0`): it raises `LLMThrottledError`, its task is retried after the wait
the limiter names, and the worker runs other tasks meanwhile. Every commit still ends
registered, none failed, and the server never saw more than the limit in any window.

The limit is counted over a 1 s window (`llm_rate_window_s`) instead of the default 60 s, so
the test takes seconds: 120 requests per minute scaled to 1 s are 2 per window."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.queues import COMMIT, EXTRACT
from ctxpipe.core.session import SessionInput
from ctxpipe.providers.llm_limits import wiring
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger, LedgerRow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _flaky_llm import FlakyLLMServer  # noqa: E402

pytest_plugins = ("celery.contrib.pytest",)

REQUESTS = 2  # per window, for every worker together
WINDOW_S = 1.0
COMMITS = 3
DEADLINE_S = 25.0  # the whole test stays under 30 s

TOPICS = [
    ("I moved to Lisbon last spring for a new job.", "I prefer green tea in the morning."),
    ("I started learning the cello in March.", "I always cycle to work, even in winter."),
    ("My sister Ana lives in Porto with two cats.", "I avoid meetings before ten o'clock."),
]


def request(n: int) -> CommitRequest:
    fact, habit = TOPICS[n]
    session = SessionInput.model_validate(
        {
            "account_id": "acme",
            "user_id": "alice",
            "agent_id": "helper",
            "session_id": f"throttled-{n}",
            "messages": [
                {"id": "m1", "role": "user", "content": fact},
                {"id": "m2", "role": "assistant", "content": "Thanks, noted."},
                {"id": "m3", "role": "user", "content": habit},
                {"id": "m4", "role": "assistant", "content": "Noted as well."},
            ],
        }
    )
    return CommitRequest.from_session(session, commit_id=f"throttled-{n}")


def _point(app: Any, settings: Settings) -> None:
    """Point the application (imported once per test process) at these settings' servers and
    drop the runtime its tasks built for earlier settings."""
    from tasks import context

    app.conf.update(broker_url=settings.redis_url, result_backend=settings.redis_url)
    app.conf.ctxpipe_settings = settings
    app._pool = None
    app.amqp._producer_pool = None
    app._backend_cache = None
    app._local = threading.local()
    context._state.clear()


@pytest.fixture(scope="module")
def celery_worker_parameters() -> dict[str, Any]:
    return {"queues": [COMMIT, EXTRACT], "perform_ping_check": False}


@pytest.fixture
def llm_server() -> Iterator[FlakyLLMServer]:
    # every answer a valid object: the only throttling here is the shared limit's
    with FlakyLLMServer(rate_limited=0.0, malformed=0.0, latency_s=0.01) as server:
        yield server


@pytest.fixture
def throttled_settings(
    make_settings: Callable[..., Settings],
    clean_db: str,
    llm_server: FlakyLLMServer,
) -> Settings:
    return make_settings(
        llm_provider="openai",
        llm_base_url=llm_server.url,
        llm_api_key=SecretStr("sk-throttled"),
        llm_requests_per_minute=round(REQUESTS * 60 / WINDOW_S),  # REQUESTS per window
        llm_rate_window_s=WINDOW_S,
        llm_max_wait_s=0.0,  # never wait in the worker: hand the slot back at once
    )


@pytest.fixture
def celery_app(throttled_settings: Settings, clean_redis: str) -> Iterator[Any]:
    """The application itself (`tasks.app.app`, every commit task registered)."""
    from tasks import context, recovery
    from tasks.app import app

    before = app.conf.ctxpipe_settings
    _point(app, throttled_settings)
    yield app
    # the results of the retried tasks' messages let go of the backend while Redis still runs
    gc.collect()
    rt = context._state.get("runtime")
    if isinstance(rt, Runtime):
        rt.close()
    _point(app, before)
    recovery._node["incarnation"] = None


def _wait_all(ledger: CommitLedger, ids: list[str], deadline: float) -> list[LedgerRow]:
    while time.monotonic() < deadline:
        rows = [ledger.get(cid) for cid in ids]
        done = [r for r in rows if r is not None and r.phase in ("registered", "failed")]
        if len(done) == len(ids):
            return done
        time.sleep(0.1)
    raise AssertionError(f"commits did not finish: {[ledger.get(cid) for cid in ids]}")


def test_throttled_tasks_are_retried_and_every_commit_lands(
    celery_app: Any,
    celery_worker: Any,
    throttled_settings: Settings,
    llm_server: FlakyLLMServer,
) -> None:
    from celery.signals import task_retry

    from tasks.dispatcher import CeleryDispatcher

    retries: list[float] = []  # the countdown of each retry of a task

    def on_retry(reason: Any = None, **_: Any) -> None:
        retries.append(reason.when)

    task_retry.connect(on_retry, weak=False)
    started = time.monotonic()
    rt = Runtime(throttled_settings)
    try:
        ledger = CommitLedger(rt.db)
        dispatcher = CeleryDispatcher(throttled_settings, rt.db)
        ids = [dispatcher.submit(request(n)) for n in range(COMMITS)]
        rows = _wait_all(ledger, ids, started + DEADLINE_S)
    finally:
        task_retry.disconnect(on_retry)
        rt.close()

    failed = {r.commit_id: r.error for r in rows if r.phase != "registered"}
    assert not failed
    assert all(r.status == "success" for r in rows), [(r.commit_id, r.status) for r in rows]
    # the worker retried throttled tasks: a delivery with retry number >= 1 in the ledger
    retried = sorted(k for r in rows for k in r.attempts if "#" in k and not k.endswith("#0"))
    assert retried, [r.attempts for r in rows]
    # each retry was a throttled call handed back to the queue (the limiter's cluster-wide
    # counter), scheduled after the wait the limiter named (within one window), not after
    # the backoff of a failure
    assert len(retries) == len(retried)
    throttling = wiring.llm_limiter(throttled_settings).snapshot()
    assert throttling.deferred == len(retries)
    assert all(0 < countdown <= WINDOW_S for countdown in retries), retries
    assert throttling.requests_per_window == REQUESTS and throttling.window_s == WINDOW_S
    # and the limit held: never more than REQUESTS requests in any window at the server (it
    # stamps arrivals, which may lag their permits by a few milliseconds)
    assert llm_server.tally.ok >= COMMITS  # at least each commit's archive summary
    assert llm_server.peak(WINDOW_S - 0.05) <= REQUESTS
    assert time.monotonic() - started < DEADLINE_S
