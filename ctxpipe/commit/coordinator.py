"""CommitCoordinator: runs a commit's steps in one process.

The inline dispatcher: the very `steps` coroutines the Celery tasks run, awaited in order on an
`InMemoryLedger` (the four extractors concurrently, as the chord runs them). Nothing retries in
process, so a transient failure reaches the caller as the error itself.
"""

from __future__ import annotations

import asyncio

from ctxpipe.commit import steps
from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.journal import CommitJournal
from ctxpipe.commit.ledger import InMemoryLedger
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.commit.phases import check_session_owner
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import CommitResult
from ctxpipe.core.session import check_limits
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


class CommitCoordinator:
    def __init__(self, components: CommitComponents) -> None:
        self._c = components

    async def commit(self, req: CommitRequest) -> CommitResult:
        dry = req.options.dry_run or self._c.settings.commit.dry_run
        check_limits(req.messages, req.used_contexts, req.used_tools, self._c.settings.limits)
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
        try:
            return await self._run(ledger, req.commit_id)
        except steps.TransientStepError as exc:
            failure = exc.__cause__ or exc
        raise failure  # the error itself, as a caller in process has always seen it

    async def _run(self, ledger: InMemoryLedger, commit_id: str) -> CommitResult:
        c = self._c
        await steps.archive(c, ledger, commit_id)
        try:
            await asyncio.gather(
                *(steps.extract(c, ledger, commit_id, name) for name in EXTRACTOR_NAMES)
            )
        except steps.TransientStepError as exc:
            cause = exc.__cause__ or exc
            raise CommitError(str(cause), phase="extract") from cause
        await steps.plan(c, ledger, commit_id)
        await steps.write(c, ledger, commit_id)
        return await steps.register(c, ledger, commit_id)

    def commit_sync(self, req: CommitRequest) -> CommitResult:
        return asyncio.run(self.commit(req))
