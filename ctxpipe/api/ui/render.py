"""Rendering of the memory browser: the Jinja2 templates shipped with the package, the route
class of its pages (every error becomes an HTML page in the API's words, a missing session a
redirect to the sign-in page) and the headers every page carries."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from ctxpipe.api.errors import map_exception
from ctxpipe.api.ui.visitor import SignInRequired, Visitor

PACKAGE = Path(str(files("ctxpipe.api.ui")))
STATIC_DIR = PACKAGE / "static"
PREFIX = "/ui"
# no script at all: the pages are plain HTML forms; styles come from /ui/static only
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _when(value: object) -> str:
    """A datetime or epoch seconds as `YYYY-MM-DD HH:MM:SS` UTC ('' for none)."""
    if value is None or value == "":
        return ""
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


templates = Jinja2Templates(directory=str(PACKAGE / "templates"))
templates.env.filters["when"] = _when
templates.env.globals["prefix"] = PREFIX


def page(
    request: Request,
    name: str,
    who: Visitor | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """The template `name` rendered for `who` (None on the sign-in page)."""
    context.update(request=request, who=who)
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def error_page(request: Request, status: int, message: str) -> Any:
    who: Visitor | None = getattr(request.state, "ui_visitor", None)
    return page(request, "error.html", who, status_code=status, status=status, message=message)


def _with_fields(message: str, details: dict[str, Any]) -> str:
    """An invalid input's message with what was wrong with each field."""
    errors = details.get("errors") or []
    said = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors if e.get("loc"))
    return f"{message}: {said}" if said else message


def sign_in_redirect() -> RedirectResponse:
    return RedirectResponse(f"{PREFIX}/login", status_code=303)


class UiRoute(APIRoute):
    """A page: errors are rendered as HTML (status and message as the /v1 API gives them),
    a missing or expired session redirects to the sign-in page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                response = await handle(request)
            except SignInRequired:
                response = sign_in_redirect()
            except RequestValidationError as exc:
                fields = ", ".join(".".join(str(p) for p in e["loc"][1:]) for e in exc.errors())
                response = error_page(request, 422, f"invalid input: {fields or 'request'}")
            except StarletteHTTPException as exc:
                response = error_page(request, exc.status_code, str(exc.detail))
            except Exception as exc:  # noqa: BLE001 - mapped as the API maps it, logged there
                e = map_exception(exc)
                response = error_page(request, e.status, _with_fields(e.message, e.details))
                response.headers.update(e.headers)
            response.headers.update(SECURITY_HEADERS)
            return response

        return guarded


__all__ = [
    "PREFIX",
    "STATIC_DIR",
    "UiRoute",
    "error_page",
    "page",
    "sign_in_redirect",
    "templates",
]
