"""One error shape for every response: ``{"error": {"code", "message", "details"}}``.

Library errors map to their status here (never a traceback; a 5xx says nothing about the
servers behind the API, the log has the cause)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxpipe.commit.steps import CommitIdConflictError
from ctxpipe.core.errors import (
    BacklogFullError,
    CommitError,
    CtxError,
    FilesystemUnavailableError,
    InvalidURIError,
    LockTimeoutError,
    NodeNotFoundError,
    Picklable,
    StorageError,
    TenancyError,
    UnavailableError,
    VersionConflictError,
)
from ctxpipe.core.session import InputLimitError
from ctxpipe.fs.erasure_marks import UserErasedError
from ctxpipe.service import CommitNotFoundError

log = logging.getLogger("ctxpipe.api")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorResponse(BaseModel):
    error: ErrorBody


def documented_errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: each status it can answer with, in the one error shape."""
    return {s: {"model": ErrorResponse} for s in statuses}


class ApiError(Picklable):
    """An error the API raises itself (auth, scopes, tenancy at the boundary, limits)."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or _CODES.get(status, "error")
        self.message = message
        self.details = details or {}
        self.headers = headers or {}


def error_response(
    status: int,
    message: str,
    code: str | None = None,
    details: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = ErrorResponse(
        error=ErrorBody(
            code=code or _CODES.get(status, "error"), message=message, details=details or {}
        )
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _validation_details(errors: Sequence[Any]) -> dict[str, Any]:
    out = []
    for e in errors[:20]:
        out.append(
            {
                "loc": [str(x) for x in e.get("loc", ())],
                "msg": str(e.get("msg", "")),
                "type": str(e.get("type", "")),
            }
        )
    return {"errors": out}


def map_exception(exc: BaseException) -> ApiError:
    """The API error a library exception stands for."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ValidationError):
        return ApiError(422, "invalid input", details=_validation_details(exc.errors()))
    if isinstance(exc, CommitNotFoundError | NodeNotFoundError):
        return ApiError(404, _one_line(exc).strip("'\""))
    if isinstance(exc, InvalidURIError):
        return ApiError(400, _one_line(exc), code="invalid_uri")
    if isinstance(exc, TenancyError):
        return ApiError(403, _one_line(exc))
    if isinstance(exc, CommitIdConflictError | VersionConflictError | UserErasedError):
        return ApiError(409, _one_line(exc))
    if isinstance(exc, CommitError):
        return ApiError(409, _one_line(exc), details={"phase": exc.phase})
    if isinstance(exc, InputLimitError):
        return ApiError(413, _one_line(exc))
    if isinstance(exc, BacklogFullError):
        retry = f"{max(1, round(exc.retry_after_s))}"
        return ApiError(
            503,
            _one_line(exc),
            code="backlog_full",
            details={
                "retry_after_s": exc.retry_after_s,
                "pending": exc.pending,
                "max_pending": exc.cap,
            },
            headers={"Retry-After": retry},
        )
    if isinstance(exc, UnavailableError):
        return ApiError(503, _one_line(exc), headers={"Retry-After": "5"})
    if isinstance(
        exc, StorageError | FilesystemUnavailableError | LockTimeoutError | psycopg.OperationalError
    ):
        log.warning("request failed, a store is unavailable: %s", _one_line(exc))
        return ApiError(503, "a store is unavailable; retry later", headers={"Retry-After": "5"})
    if isinstance(exc, ValueError):
        return ApiError(422, _one_line(exc))
    log.error("internal error: %s", _one_line(exc), exc_info=exc)
    return ApiError(500, "internal error")


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(_req: Request, exc: Exception) -> JSONResponse:
        e = map_exception(exc)
        return error_response(e.status, e.message, e.code, e.details, e.headers)

    async def on_validation(_req: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(422, "invalid request", details=_validation_details(exc.errors()))

    async def on_http(_req: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return error_response(exc.status_code, str(exc.detail), headers=exc.headers)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    # handled by the exception middleware (a response, no re-raise); anything else reaches
    # the server-error middleware: a 500 in the same shape, the traceback in the log only
    for cls in (ApiError, CtxError, ValueError, psycopg.Error, OSError, Exception):
        app.add_exception_handler(cls, on_api_error)


__all__ = [
    "ApiError",
    "ErrorBody",
    "ErrorResponse",
    "error_response",
    "install_error_handlers",
    "map_exception",
]
