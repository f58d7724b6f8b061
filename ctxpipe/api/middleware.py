"""ASGI middleware: the request body size limit and the per-route latency histogram."""

from __future__ import annotations

import time
from typing import Any

from fastapi import HTTPException
from prometheus_client import Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxpipe.api.errors import error_response


class _BodyTooLarge(HTTPException):
    """Raised while the body is read (the app's error handler answers 413)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body larger than {max_bytes} bytes")


class BodyLimitMiddleware:
    """Refuse a body larger than `max_bytes` with 413, whether it declares its length or
    streams it (chunked): nothing past the limit is read."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False
            if too_big:
                await self._refuse(scope, receive, send)
                return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            f"request body larger than {self.max_bytes} bytes",
            details={"max_bytes": self.max_bytes},
        )
        await response(scope, receive, send)


class MetricsMiddleware:
    """Observe every request's duration under its route template (not its raw path, so
    ids do not explode the label set)."""

    def __init__(self, app: ASGIApp, histogram: Histogram) -> None:
        self.app = app
        self.histogram = histogram

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route: Any = scope.get("route")
            path = getattr(route, "path", None) or "(unmatched)"
            self.histogram.labels(scope.get("method", ""), path, str(status["code"])).observe(
                time.perf_counter() - start
            )


__all__ = ["BodyLimitMiddleware", "MetricsMiddleware"]
