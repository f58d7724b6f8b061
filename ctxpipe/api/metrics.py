"""Prometheus metrics of the API: request latency per route; read at scrape time: commits by
phase, the commit backlog (commits in flight, the oldest one's age, the drain rate, the
back-pressure cap), the broker's queue depths, the outbox backlog and the age of its oldest
pending event, what the registered commits cost in LLM calls and tokens per phase, and the
LLM limiter's throttling (`ctxpipe.api.llm_metrics`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ctxpipe.api.llm_metrics import throttling_metrics
from ctxpipe.providers.llm_limits import LimiterSnapshot
from ctxpipe.storage.commit_ledger import CommitBacklog, LLMCost

log = logging.getLogger("ctxpipe.api")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class PipelineCollector(Collector):
    """Reads the ledger and the outbox on each scrape (a failed reading: `ctxpipe_store_up 0`)."""

    def __init__(
        self,
        commits_by_phase: Callable[[], dict[str, int]],
        outbox_counts: Callable[[], dict[str, int]],
        oldest_pending_s: Callable[[], float | None],
        *,
        backlog: Callable[[], CommitBacklog] | None = None,
        llm_cost: Callable[[], LLMCost] | None = None,
        queue_depths: Callable[[], dict[str, int]] | None = None,
        llm_throttling: Callable[[], LimiterSnapshot | None] | None = None,
    ) -> None:
        self._commits = commits_by_phase
        self._outbox = outbox_counts
        self._oldest = oldest_pending_s
        self._backlog = backlog
        self._cost = llm_cost
        self._queues = queue_depths
        self._throttling = llm_throttling

    def describe(self) -> list[Metric]:
        return []  # read at scrape time only (registering must not query the database)

    def collect(self) -> Iterator[Metric]:
        yield from self._broker()
        if self._throttling is not None:
            yield from throttling_metrics(self._throttling)
        up = GaugeMetricFamily("ctxpipe_store_up", "1 when the ledger and outbox could be read")
        try:
            phases = self._commits()
            outbox = self._outbox()
            oldest = self._oldest()
            backlog = self._backlog() if self._backlog is not None else None
            cost = self._cost() if self._cost is not None else None
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail with the database
            log.warning("metrics: cannot read the ledger/outbox: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        if backlog is not None:
            yield from _backlog_metrics(backlog)
        if cost is not None:
            yield from _cost_metrics(cost)
        commits = GaugeMetricFamily(
            "ctxpipe_commits", "Commits in the ledger by phase", None, ["phase"]
        )
        for phase, n in sorted(phases.items()):
            commits.add_metric([phase], n)
        yield commits
        events = GaugeMetricFamily(
            "ctxpipe_outbox_events", "Outbox events by status", None, ["status"]
        )
        for status, n in sorted(outbox.items()):
            events.add_metric([status], n)
        yield events
        waiting = GaugeMetricFamily(
            "ctxpipe_outbox_backlog", "Outbox events not indexed yet (pending, claimed, failed)"
        )
        waiting.add_metric([], sum(outbox.get(s, 0) for s in ("pending", "claimed", "failed")))
        yield waiting
        age = GaugeMetricFamily(
            "ctxpipe_outbox_oldest_pending_seconds",
            "Age of the oldest outbox event still waiting (0 when none)",
        )
        age.add_metric([], oldest or 0.0)
        yield age

    def _broker(self) -> Iterator[Metric]:
        if self._queues is None:
            return
        up = GaugeMetricFamily("ctxpipe_broker_up", "1 when the broker's queues could be read")
        try:
            depths = self._queues()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail with the broker
            log.warning("metrics: cannot read the broker's queues: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        queued = GaugeMetricFamily(
            "ctxpipe_queue_messages", "Messages waiting in each broker queue", None, ["queue"]
        )
        for queue, n in sorted(depths.items()):
            queued.add_metric([queue], n)
        yield queued


def _backlog_metrics(b: CommitBacklog) -> Iterator[Metric]:
    for name, doc, value in (
        (
            "ctxpipe_commits_in_flight",
            "Commits accepted and not finished (ledger phase neither registered nor failed)",
            b.in_flight,
        ),
        (
            "ctxpipe_commits_oldest_in_flight_seconds",
            "Age of the oldest commit in flight (0 when none)",
            b.oldest_age_s or 0.0,
        ),
        (
            "ctxpipe_commits_drain_per_second",
            f"Commits finished per second over the last {b.window_s:.0f} s",
            b.drain_per_s,
        ),
        (
            "ctxpipe_commits_max_pending",
            "Back-pressure cap: a new commit is refused at this many in flight (0: no cap)",
            b.max_pending,
        ),
    ):
        g = GaugeMetricFamily(name, doc)
        g.add_metric([], value)
        yield g


def _cost_metrics(cost: LLMCost) -> Iterator[Metric]:
    """Sums over the registered commits in the ledger (they fall only when commits are erased,
    which Prometheus reads as a counter reset)."""
    messages = CounterMetricFamily(
        "ctxpipe_committed_messages", "Messages of the registered commits"
    )
    messages.add_metric([], cost.messages)
    yield messages
    for name, doc, field in (
        ("ctxpipe_llm_calls", "LLM calls of the registered commits, by phase", "calls"),
        (
            "ctxpipe_llm_prompt_tokens",
            "LLM prompt tokens of the registered commits, by phase",
            "prompt_tokens",
        ),
        (
            "ctxpipe_llm_completion_tokens",
            "LLM completion tokens of the registered commits, by phase",
            "completion_tokens",
        ),
        (
            "ctxpipe_llm_repaired",
            "LLM calls of the registered commits answered by a repaired reply, by phase",
            "repaired",
        ),
        (
            "ctxpipe_llm_retried",
            "LLM attempts of the registered commits re-sent for unusable output, by phase",
            "retried",
        ),
        (
            "ctxpipe_llm_failed",
            "LLM calls of the registered commits that failed after every attempt, by phase",
            "failed",
        ),
    ):
        c = CounterMetricFamily(name, doc, labels=["phase"])
        for phase, usage in sorted(cost.by_phase.items()):
            c.add_metric([phase], getattr(usage, field))
        yield c


class ApiMetrics:
    """One registry per app. With `PROMETHEUS_MULTIPROC_DIR` set (several uvicorn workers),
    the latency histogram is aggregated over every worker process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "ctxpipe_api_request_seconds",
            "API request latency by method, route template and status",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._multiproc = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

    def add_pipeline(self, collector: PipelineCollector) -> None:
        self.registry.register(collector)
        self._pipeline = collector

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        if not self._multiproc:
            return generate_latest(self.registry)
        from prometheus_client import multiprocess

        merged = CollectorRegistry()
        multiprocess.MultiProcessCollector(merged)
        pipeline = getattr(self, "_pipeline", None)
        if pipeline is not None:
            merged.register(pipeline)
        return generate_latest(merged)


__all__ = ["ApiMetrics", "PipelineCollector"]
