"""Prometheus metrics of the LLM limiter (read at scrape time from the cluster-wide counters in
Redis, so they count the throttling of every worker): waits, time waited, 429s, `Retry-After`
honoured, calls handed back to the queue, what the current window holds, and the limits: per
rate window (`llm_rate_window_s`, itself a gauge) and as the rates per minute they enforce."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ctxpipe.providers.llm_limits import LimiterSnapshot

log = logging.getLogger("ctxpipe.api")

_COUNTERS = (
    ("ctxpipe_llm_throttled", "LLM requests that waited for the rate limits", "throttled"),
    (
        "ctxpipe_llm_throttle_wait_seconds",
        "Seconds LLM requests spent waiting for the rate limits and Retry-After",
        "wait_seconds",
    ),
    ("ctxpipe_llm_http_429", "HTTP 429 answers from the LLM server", "http_429"),
    (
        "ctxpipe_llm_retry_after_honoured",
        "LLM server answers whose Retry-After every worker waited out",
        "retry_after_honoured",
    ),
    (
        "ctxpipe_llm_deferred",
        "LLM calls handed back to the task queue (the wait was over llm_max_wait_s)",
        "deferred",
    ),
)
_GAUGES = (
    (
        "ctxpipe_llm_requests_in_window",
        "LLM requests sent in the current rate window (ctxpipe_llm_rate_window_seconds)",
        "requests_in_window",
    ),
    (
        "ctxpipe_llm_tokens_in_window",
        "LLM tokens charged in the current rate window (ctxpipe_llm_rate_window_seconds)",
        "tokens_in_window",
    ),
    ("ctxpipe_llm_in_flight", "LLM requests in flight (with a concurrency cap)", "in_flight"),
    ("ctxpipe_llm_cooldown_seconds", "Seconds left of a server's Retry-After", "cooldown_s"),
    (
        "ctxpipe_llm_rate_window_seconds",
        "The window the LLM request and token limits are counted over (llm_rate_window_s)",
        "window_s",
    ),
)
_LIMITS = (
    (
        "ctxpipe_llm_requests_per_minute_limit",
        "LLM requests per minute the limiter allows: its limit per window as a rate (0: none)",
        "requests_per_minute",
    ),
    (
        "ctxpipe_llm_tokens_per_minute_limit",
        "LLM tokens per minute the limiter allows: its limit per window as a rate (0: none)",
        "tokens_per_minute",
    ),
    (
        "ctxpipe_llm_requests_per_window_limit",
        "Most LLM requests in any rate window (ctxpipe_llm_rate_window_seconds; 0: none)",
        "requests_per_window",
    ),
    (
        "ctxpipe_llm_tokens_per_window_limit",
        "Most LLM tokens in any rate window (ctxpipe_llm_rate_window_seconds; 0: none)",
        "tokens_per_window",
    ),
    (
        "ctxpipe_llm_max_concurrency_limit",
        "Most LLM requests in flight (0: none)",
        "max_concurrency",
    ),
)


def throttling_metrics(read: Callable[[], LimiterSnapshot | None]) -> Iterator[Metric]:
    """The limiter's metrics, labelled by provider (its URL and key fingerprint); nothing with
    the `rules` provider; `ctxpipe_llm_limiter_up 0` when Redis cannot be read."""
    up = GaugeMetricFamily("ctxpipe_llm_limiter_up", "1 when the LLM limiter could be read")
    try:
        snap = read()
    except Exception as exc:  # noqa: BLE001 - a scrape must not fail with Redis
        log.warning("metrics: cannot read the LLM limiter: %s", exc)
        up.add_metric([], 0)
        yield up
        return
    if snap is None:
        return
    up.add_metric([], 1)
    yield up
    labels = [snap.label]
    for name, doc, field in _COUNTERS:
        c = CounterMetricFamily(name, doc, labels=["provider"])
        c.add_metric(labels, float(getattr(snap, field)))
        yield c
    for name, doc, field in _GAUGES:
        g = GaugeMetricFamily(name, doc, labels=["provider"])
        g.add_metric(labels, float(getattr(snap, field)))
        yield g
    for name, doc, field in _LIMITS:
        g = GaugeMetricFamily(name, doc, labels=["provider"])
        g.add_metric(labels, float(getattr(snap, field) or 0))
        yield g


__all__ = ["throttling_metrics"]
