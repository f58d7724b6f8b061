"""CommitCoordinator: runs the five phases in one process (seed 004 §15).

The Celery workflow in `tasks/` runs the very same phase functions as separate tasks.
"""

from __future__ import annotations

import asyncio
import time

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.journal import CommitJournal
from ctxpipe.commit.payloads import CommitRequest, PlanOutcome, WriteOutcome
from ctxpipe.commit.phases import (
    archive_phase,
    check_session_owner,
    extract_phase,
    plan_phase,
    write_phase,
)
from ctxpipe.commit.register import build_result, register_phase, usage_by_phase
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import CommitResult
from ctxpipe.core.session import check_limits
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


class CommitCoordinator:
    def __init__(self, components: CommitComponents) -> None:
        self._c = components

    async def commit(self, req: CommitRequest) -> CommitResult:
        started = time.perf_counter()
        dry = req.options.dry_run or self._c.settings.commit.dry_run
        check_limits(req.messages, req.used_contexts, req.used_tools, self._c.settings.limits)
        # refused before the journal is consulted: a commit id is looked up only within the
        # session's owner, so another user's recorded result is never returned
        check_session_owner(self._c, req)
        if not dry:
            done = CommitJournal(self._c.fs).load(req)
            if done is not None:  # this commit id already ran to completion: change nothing
                return done
        archived = await archive_phase(self._c, req)
        archive = archived.archive
        try:
            results = await asyncio.gather(
                *(extract_phase(self._c, name, req, archive) for name in EXTRACTOR_NAMES)
            )
        except Exception as exc:
            raise CommitError(str(exc), phase="extract") from exc
        plan: PlanOutcome = await plan_phase(self._c, req, archive, list(results))
        if dry:
            return build_result(
                req,
                archive,
                plan,
                WriteOutcome(),
                [],
                plan.warnings,
                usage_by_phase(archived, list(results), plan),
                int((time.perf_counter() - started) * 1000),
            )
        written = await write_phase(self._c, req, archive, plan)
        return register_phase(
            self._c,
            req,
            archive,
            plan,
            written,
            usage=usage_by_phase(archived, list(results), plan, written),
            duration_ms=int((time.perf_counter() - started) * 1000),
        )

    def commit_sync(self, req: CommitRequest) -> CommitResult:
        return asyncio.run(self.commit(req))
