"""Key management for an account's admin keys: create (shown once), list, revoke."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from ctxpipe.api.auth import AdminKey, authenticate
from ctxpipe.api.errors import ApiError, documented_errors
from ctxpipe.api.keys import ApiKey, CreatedKey, KeySpec, KeyStore
from ctxpipe.api.schemas import KeyIn

router = APIRouter(prefix="/v1/keys", tags=["keys"])
_ERRORS = documented_errors(400, 401, 403, 404, 422, 429, 503)


def _store(request: Request) -> KeyStore:
    return request.app.state.keys


@router.get("/self", response_model=ApiKey, responses=_ERRORS)
def whoami(key: ApiKey = Depends(authenticate)) -> ApiKey:
    """The calling key: its account, the user or agent it is bound to, its scopes."""
    return key


@router.post("", status_code=201, response_model=CreatedKey, responses=_ERRORS)
def create_key(spec: KeyIn, request: Request, key: ApiKey = AdminKey) -> CreatedKey:
    """A new key of this account (a key bound to a user or agent creates keys bound to the
    same one). The key is in the response only."""
    for field in ("user_id", "agent_id"):
        bound = getattr(key, field)
        asked = getattr(spec, field)
        if bound is not None and asked != bound:
            raise ApiError(403, f"this key can only create keys bound to its {field}")
    created = _store(request).create(
        KeySpec(
            account_id=key.account_id,
            user_id=spec.user_id,
            agent_id=spec.agent_id,
            scopes=spec.scopes,
            name=spec.name,
        )
    )
    return created


@router.get("", response_model=list[ApiKey], responses=_ERRORS)
def list_keys(request: Request, key: ApiKey = AdminKey) -> list[ApiKey]:
    """The active keys of this account (never a secret)."""
    keys = _store(request).list(key.account_id)
    if key.user_id is not None or key.agent_id is not None:
        keys = [k for k in keys if (k.user_id, k.agent_id) == (key.user_id, key.agent_id)]
    return keys


@router.delete("/{key_id}", status_code=204, responses=_ERRORS)
def revoke_key(
    key_id: Annotated[str, Path(max_length=32)], request: Request, key: ApiKey = AdminKey
) -> None:
    store = _store(request)
    target = store.get(key_id)
    same = target is not None and target.account_id == key.account_id
    if same and (key.user_id is not None or key.agent_id is not None):
        same = (target.user_id, target.agent_id) == (key.user_id, key.agent_id)  # type: ignore[union-attr]
    if not same or not store.revoke(key_id, key.account_id):
        raise ApiError(404, f"no such active key: {key_id}")
