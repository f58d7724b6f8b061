"""ContextEngineService: the one facade producers and agents use.

Commits go through a `CommitDispatcher` port: the inline dispatcher runs the pipeline in this
process; the Celery dispatcher (in `tasks/`) enqueues the workflow on the broker.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from pydantic import BaseModel

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.errors import CommitError, CtxError
from ctxpipe.core.models import CommitOptions, CommitResult
from ctxpipe.core.session import Message, RequestContext, SessionInput, ToolUse
from ctxpipe.runtime import Runtime


class CommitView(BaseModel):
    """What a producer can learn about a commit it submitted."""

    commit_id: str
    phase: str
    status: str | None = None
    error: str | None = None
    error_phase: str | None = None
    result: CommitResult | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.phase == "failed"


class CommitNotFoundError(CtxError, KeyError):
    def __init__(self, commit_id: str) -> None:
        super().__init__(f"no such commit: {commit_id}")


class CommitDispatcher(Protocol):
    def submit(self, req: CommitRequest) -> str: ...

    def get(self, commit_id: str) -> CommitView: ...


class InlineDispatcher:
    """Runs each commit to completion in the calling process."""

    def __init__(self, coordinator: CommitCoordinator) -> None:
        self._coordinator = coordinator
        self._views: dict[str, CommitView] = {}

    def submit(self, req: CommitRequest) -> str:
        try:
            result = self._coordinator.commit_sync(req)
            self._views[req.commit_id] = CommitView(
                commit_id=req.commit_id,
                phase="registered",
                status=result.status.value,
                result=result,
            )
        except CommitError as exc:
            self._views[req.commit_id] = CommitView(
                commit_id=req.commit_id,
                phase="failed",
                status="failed",
                error=str(exc),
                error_phase=exc.phase,
            )
        return req.commit_id

    def get(self, commit_id: str) -> CommitView:
        try:
            return self._views[commit_id]
        except KeyError:
            raise CommitNotFoundError(commit_id) from None


class ContextEngineService:
    def __init__(self, runtime: Runtime, dispatcher: CommitDispatcher | None = None) -> None:
        self.runtime = runtime
        self.coordinator = CommitCoordinator(runtime.components())
        self.dispatcher: CommitDispatcher = dispatcher or InlineDispatcher(self.coordinator)

    # -------------------------------------------------------------- write path
    @staticmethod
    def build_request(
        ctx: RequestContext,
        messages: list[Message] | list[dict],
        used_contexts: list[str] | None = None,
        used_tools: list[ToolUse] | list[dict] | None = None,
        options: CommitOptions | None = None,
        commit_id: str | None = None,
    ) -> CommitRequest:
        data: dict = {
            "ctx": ctx,
            "messages": messages,
            "used_contexts": used_contexts or [],
            "used_tools": used_tools or [],
            "options": options or CommitOptions(),
        }
        if commit_id:
            data["commit_id"] = commit_id
        return CommitRequest.model_validate(data)

    async def commit_session_async(self, req: CommitRequest) -> CommitResult:
        """Run the whole pipeline in this process and return its result."""
        return await self.coordinator.commit(req)

    def commit_session_sync(
        self, ctx: RequestContext, messages: list[Message] | list[dict], **kwargs: object
    ) -> CommitResult:
        req = self.build_request(ctx, messages, **kwargs)  # type: ignore[arg-type]
        return asyncio.run(self.commit_session_async(req))

    def commit_session(
        self, ctx: RequestContext, messages: list[Message] | list[dict], **kwargs: object
    ) -> str:
        """Submit a commit through the dispatcher; returns its commit id."""
        req = self.build_request(ctx, messages, **kwargs)  # type: ignore[arg-type]
        return self.dispatcher.submit(req)

    def submit(self, session: SessionInput, options: CommitOptions | None = None) -> str:
        return self.dispatcher.submit(CommitRequest.from_session(session, options))

    def get_commit(self, commit_id: str) -> CommitView:
        return self.dispatcher.get(commit_id)

    def wait_commit(
        self, commit_id: str, timeout: float = 60.0, poll_s: float = 0.05
    ) -> CommitView:
        deadline = time.monotonic() + timeout
        while True:
            view = self.dispatcher.get(commit_id)
            if view.finished:
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"commit {commit_id} not finished after {timeout:.0f}s (phase {view.phase})"
                )
            time.sleep(poll_s)

    def close(self) -> None:
        closer = getattr(self.dispatcher, "close", None)
        if closer is not None:
            closer()
        self.runtime.close()
