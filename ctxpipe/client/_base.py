"""What the sync and async clients share: requests as (method, path, params, json), responses
parsed into the library's models, errors raised as `CtxApiError`."""

from __future__ import annotations

from typing import Any

import httpx

from ctxpipe.client.models import CommitStatus
from ctxpipe.core.errors import Picklable
from ctxpipe.core.session import Message


class CtxApiError(Picklable):
    """An error answered by the API (its JSON error shape), or no answer at all (status 0)."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class CommitFailedError(CtxApiError):
    def __init__(self, status: CommitStatus) -> None:
        super().__init__(
            200,
            "commit_failed",
            f"commit {status.commit_id} failed in phase {status.error_phase}: {status.error}",
            {"commit_id": status.commit_id},
        )
        self.commit = status


def raise_for(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        err = resp.json()["error"]
        raise CtxApiError(resp.status_code, err["code"], err["message"], err.get("details"))
    except (ValueError, KeyError, TypeError):
        raise CtxApiError(resp.status_code, "http_error", resp.text[:500]) from None


def identity(user_id: str | None, agent_id: str | None, session_id: str | None) -> dict[str, str]:
    out = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}
    return {k: v for k, v in out.items() if v is not None}


def messages_json(messages: list[Message] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m.model_dump(mode="json", exclude_none=True) if isinstance(m, Message) else dict(m)
        for m in messages
    ]


def headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}", "User-Agent": "ctxpipe-client"}


class Defaults:
    """The identity a client names when a call does not (a key bound to a user fixes it)."""

    def __init__(self, user_id: str | None, agent_id: str | None, session_id: str | None) -> None:
        self.user_id = user_id
        self.agent_id = agent_id
        self.session_id = session_id

    def who(
        self, user_id: str | None, agent_id: str | None, session_id: str | None
    ) -> dict[str, str]:
        return identity(
            user_id or self.user_id, agent_id or self.agent_id, session_id or self.session_id
        )
