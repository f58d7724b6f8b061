"""Unversioned operations routes: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

import os
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from ctxpipe.api.schemas import Health
from ctxpipe.core.config import Settings

router = APIRouter(tags=["operations"])
Probe = Callable[[], None]


def default_probes(settings: Settings) -> dict[str, Probe]:
    """PostgreSQL answers `SELECT 1`, Redis answers PING, the FS root is a writable
    directory; each within a couple of seconds."""

    def postgres() -> None:
        import psycopg

        with psycopg.connect(settings.database_url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")

    def redis_ping() -> None:
        import redis

        client = redis.Redis.from_url(
            settings.redis_url, socket_connect_timeout=2, socket_timeout=2
        )
        try:
            client.ping()
        finally:
            client.close()

    def fs() -> None:
        root = settings.fs_root
        if not root.is_dir():
            raise OSError("the FS root is missing")
        if not os.access(root, os.W_OK | os.X_OK):
            raise OSError("the FS root is not writable")

    return {"postgres": postgres, "redis": redis_ping, "fs": fs}


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process is up (no dependency is checked)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(request: Request) -> JSONResponse:
    """PostgreSQL, Redis and the FS are reachable (503 naming what is not)."""
    probes: dict[str, Probe] = request.app.state.probes
    checks: dict[str, str] = {}
    for name, probe in probes.items():
        try:
            probe()
            checks[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - reported, never raised
            checks[name] = f"unreachable: {type(exc).__name__}"
    ready = all(v == "ok" for v in checks.values())
    body = Health(status="ready" if ready else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus exposition: latency per route, commits by phase, the outbox backlog."""
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
