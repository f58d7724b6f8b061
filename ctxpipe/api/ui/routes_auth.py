"""Sign in with an API key (a POST form; the key never travels in a URL) and sign out."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import RedirectResponse

from ctxpipe.api.auth import acting_context
from ctxpipe.api.errors import ApiError
from ctxpipe.api.keys import KeyStore
from ctxpipe.api.ui.render import PREFIX, UiRoute, page
from ctxpipe.api.ui.visitor import (
    COOKIE,
    LOGIN_COOKIE,
    Visitor,
    check_csrf,
    sessions,
    signed_in_key,
    visitor,
)

router = APIRouter(prefix=PREFIX, route_class=UiRoute, include_in_schema=False)
Id = Annotated[str, Form(max_length=128)]


def _cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _form(request: Request, status: int = 200, error: str = "", **values: str) -> Response:
    token = secrets.token_urlsafe(32)
    response = page(
        request, "login.html", None, status_code=status, error=error, token=token, **values
    )
    _cookie(response, request, LOGIN_COOKIE, token, max_age=3600)
    return response


@router.get("/login")
def login_form(request: Request) -> Response:
    return _form(request)


@router.post("/login")
def login(
    request: Request,
    key: Annotated[str, Form(max_length=256)],
    token: Annotated[str, Form(max_length=128)] = "",
    user_id: Id = "",
    agent_id: Id = "",
) -> Response:
    """Check the key as the API does, then open a session acting as its user and agent."""
    check_csrf(request.cookies.get(LOGIN_COOKIE, ""), token)
    keys: KeyStore = request.app.state.keys
    found = keys.verify(key.strip())
    if found is None:
        return _form(request, 401, "invalid or revoked API key", user_id=user_id, agent_id=agent_id)
    try:
        signed_in_key(request, found)
        ctx = acting_context(found, user_id=user_id or None, agent_id=agent_id or None)
    except ApiError as exc:
        return _form(request, exc.status, exc.message, user_id=user_id, agent_id=agent_id)
    store = sessions(request)
    session_id = store.create(found.key_id, ctx.user_id, ctx.agent_id)
    response = RedirectResponse(f"{PREFIX}/", status_code=303)
    _cookie(response, request, COOKIE, session_id, max_age=store.ttl_s)
    response.delete_cookie(LOGIN_COOKIE, path=PREFIX)
    return response


@router.post("/logout")
def logout(
    request: Request,
    csrf: Annotated[str, Form(max_length=128)] = "",
    who: Visitor = Depends(visitor),
) -> Response:
    check_csrf(who.csrf, csrf)
    sessions(request).delete(who.session_id)
    response = RedirectResponse(f"{PREFIX}/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response
