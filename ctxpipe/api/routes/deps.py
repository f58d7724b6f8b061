"""Shared route helpers: the service of the app, and identity from query parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from ctxpipe.api.auth import acting_context
from ctxpipe.api.keys import ApiKey
from ctxpipe.core.session import RequestContext
from ctxpipe.service import ContextEngineService


def service(request: Request) -> ContextEngineService:
    return request.app.state.service


class IdentityQuery:
    """`account_id`, `user_id`, `agent_id`, `session_id` as query parameters."""

    def __init__(
        self,
        account_id: Annotated[str | None, Query(max_length=64)] = None,
        user_id: Annotated[str | None, Query(max_length=128)] = None,
        agent_id: Annotated[str | None, Query(max_length=128)] = None,
        session_id: Annotated[str | None, Query(max_length=128)] = None,
    ) -> None:
        self.account_id = account_id
        self.user_id = user_id
        self.agent_id = agent_id
        self.session_id = session_id

    def context(self, key: ApiKey) -> RequestContext:
        return acting_context(
            key,
            account_id=self.account_id,
            user_id=self.user_id,
            agent_id=self.agent_id,
            session_id=self.session_id,
        )
