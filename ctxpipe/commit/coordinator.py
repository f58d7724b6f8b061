"""CommitCoordinator: a commit in one process, on the canvas the workers run.

The inline dispatcher: records the commit in an `InMemoryLedger` and hands the canvas of the
settings (`commit.canvas`, `CTXPIPE_COMMIT__CANVAS`) to the in-process executor
(`commit.executor`), which runs the very steps the Celery tasks run, in their order.
"""

from __future__ import annotations

import asyncio

from ctxpipe.commit import big_messages, steps
from ctxpipe.commit.canvas import canvas
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.executor import execute
from ctxpipe.commit.journal import CommitJournal
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.phases import check_session_owner
from ctxpipe.core.models import CommitResult
from ctxpipe.observability.spans import phase_span


class CommitCoordinator:
    def __init__(self, components: CommitComponents) -> None:
        self._c = components

    async def commit(self, req: CommitRequest) -> CommitResult:
        with phase_span("in_process", req.commit_id):  # the phases' spans: one trace
            return await self._commit(req)

    async def _commit(self, req: CommitRequest) -> CommitResult:
        dry = req.options.dry_run or self._c.settings.commit.dry_run
        req = big_messages.admit(req, self._c.settings.limits)
        # refused before the journal is consulted: a commit id is looked up only within the
        # session's owner, so another user's recorded result is never returned
        check_session_owner(self._c, req)
        if not dry:
            done = CommitJournal(self._c.fs).load(req)
            if done is not None:  # this commit id already ran to completion: change nothing
                return done
        # one ledger per commit: a commit id may run again here (the journal above decides)
        ledger = InMemoryLedger()
        steps.submit(ledger, req)
        self._c.step_cache.remember(req)  # the request itself, not a copy parsed back
        stages = canvas(kind=self._c.settings.commit.canvas)
        try:
            return await execute(stages, self._c, ledger, req.commit_id)
        except steps.TransientStepError as exc:
            failure = exc.__cause__ or exc
        raise failure  # the error itself, as a caller in process has always seen it

    def commit_sync(self, req: CommitRequest) -> CommitResult:
        return asyncio.run(self.commit(req))
