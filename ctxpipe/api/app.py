"""The FastAPI app over `ContextEngineService` (no business logic here: every route calls the
service). The composition root (``ctxpipe serve``) hands it a service whose commits go through
Celery; tests may hand it one that commits in process."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from ctxpipe.api.errors import install_error_handlers
from ctxpipe.api.keys import KeyStore
from ctxpipe.api.metrics import ApiMetrics, PipelineCollector
from ctxpipe.api.middleware import BodyLimitMiddleware, MetricsMiddleware
from ctxpipe.api.ratelimit import KeyRateLimiter
from ctxpipe.api.routes import commits, keys, ops, read, sessions
from ctxpipe.api.ui import mount_ui
from ctxpipe.core.config import Settings
from ctxpipe.service import ContextEngineService
from ctxpipe.storage.commit_ledger import CommitBacklog

log = logging.getLogger("ctxpipe.api")

DESCRIPTION = """\
The agent-facing API of ctxpipe. Every `/v1` request carries an API key
(`Authorization: Bearer ctx_…`, made with `ctxpipe keys create`): the key decides the account,
and when it is bound to a user or agent, the user or agent. Errors are
`{"error": {"code", "message", "details"}}`.
"""


def create_app(
    settings: Settings,
    service: ContextEngineService,
    *,
    key_store: KeyStore | None = None,
    probes: dict[str, Callable[[], None]] | None = None,
    close_service: bool = True,
) -> FastAPI:
    """The app. `service` is closed on shutdown unless `close_service` is False."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> Any:
        try:
            yield
        finally:
            _app.state.ui_sessions.close()
            if close_service:
                service.close()

    app = routes_app(lifespan)
    runtime = service.runtime
    app.state.settings = settings
    app.state.service = service
    app.state.keys = key_store or KeyStore(
        runtime.db, schema=settings.db_schema, cache_s=settings.api_key_cache_s
    )
    app.state.limiter = KeyRateLimiter(settings.api_rate_limit, settings.redis_url)
    app.state.probes = probes if probes is not None else ops.default_probes(settings)
    mount_ui(app, settings)  # the memory browser at /ui

    metrics = ApiMetrics()
    metrics.add_pipeline(pipeline_collector(settings, service))
    app.state.metrics = metrics

    # outermost first: the histogram sees every response, 413s included
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.api_max_body_bytes)
    app.add_middleware(MetricsMiddleware, histogram=metrics.latency)
    return app


def routes_app(lifespan: Any = None) -> FastAPI:
    """The routes, their models and error answers, without state: what `create_app` serves
    and what the OpenAPI document describes."""
    app = FastAPI(title="ctxpipe", version="1", description=DESCRIPTION, lifespan=lifespan)
    install_error_handlers(app)
    for router in (ops.router, commits.router, sessions.router, read.router, keys.router):
        app.include_router(router)
    return app


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document, built without a service or a database (the docs site's
    HTTP API page is generated from it; the served `/openapi.json` is the same)."""
    return routes_app().openapi()


def pipeline_collector(settings: Settings, service: ContextEngineService) -> PipelineCollector:
    """The scrape-time readings of the ledger, the outbox and the broker."""
    from ctxpipe.core.queues import QUEUES
    from ctxpipe.providers.llm_limits.wiring import llm_throttling
    from ctxpipe.storage.broker_queues import queue_depths
    from ctxpipe.storage.commit_ledger import CommitLedger

    runtime = service.runtime
    ledger = CommitLedger(runtime.db, schema=settings.db_schema)
    cap = settings.commit.max_pending

    def backlog() -> CommitBacklog:
        return ledger.backlog().model_copy(update={"max_pending": cap})

    return PipelineCollector(
        ledger.counts_by_phase,
        lambda: runtime.outbox.counts(),
        lambda: runtime.outbox.oldest_pending_age_s(),
        backlog=backlog,
        llm_cost=ledger.llm_cost,
        queue_depths=lambda: queue_depths(settings.redis_url, QUEUES),
        llm_throttling=lambda: llm_throttling(settings),
    )


__all__ = ["create_app", "openapi_document", "pipeline_collector", "routes_app"]
