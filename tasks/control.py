"""Broker-level worker control used by the CLI's composition root (`ctxpipe dev`)."""

from __future__ import annotations

from collections.abc import Callable

from celery import Celery


def worker_probe(redis_url: str) -> Callable[[list[str]], set[str]]:
    """Ping workers through the broker from this process (`celery inspect ping`, no fork)."""
    control = Celery("ctxpipe-dev-probe", broker=redis_url, set_as_current=False)

    def probe(nodes: list[str]) -> set[str]:
        try:
            replies = control.control.ping(destination=nodes, timeout=0.5)
        except Exception:  # noqa: BLE001 - broker not reachable yet: simply "not ready"
            return set()
        return {node for reply in replies for node in reply} & set(nodes)

    return probe
