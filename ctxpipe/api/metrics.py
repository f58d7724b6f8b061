"""Prometheus metrics of the API: request latency per route, commits by phase, the outbox
backlog and the age of its oldest pending event (the last three read at scrape time)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("ctxpipe.api")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class PipelineCollector(Collector):
    """Reads the ledger and the outbox on each scrape (a failed reading: `ctxpipe_store_up 0`)."""

    def __init__(
        self,
        commits_by_phase: Callable[[], dict[str, int]],
        outbox_counts: Callable[[], dict[str, int]],
        oldest_pending_s: Callable[[], float | None],
    ) -> None:
        self._commits = commits_by_phase
        self._outbox = outbox_counts
        self._oldest = oldest_pending_s

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # read at scrape time only (registering must not query the database)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("ctxpipe_store_up", "1 when the ledger and outbox could be read")
        try:
            phases = self._commits()
            outbox = self._outbox()
            oldest = self._oldest()
        except Exception as exc:  # noqa: BLE001 - a scrape must not fail with the database
            log.warning("metrics: cannot read the ledger/outbox: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
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
        backlog = GaugeMetricFamily(
            "ctxpipe_outbox_backlog", "Outbox events not indexed yet (pending, claimed, failed)"
        )
        backlog.add_metric([], sum(outbox.get(s, 0) for s in ("pending", "claimed", "failed")))
        yield backlog
        age = GaugeMetricFamily(
            "ctxpipe_outbox_oldest_pending_seconds",
            "Age of the oldest outbox event still waiting (0 when none)",
        )
        age.add_metric([], oldest or 0.0)
        yield age


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
