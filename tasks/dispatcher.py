"""CeleryDispatcher: the service's CommitDispatcher port implemented on the broker."""

from __future__ import annotations

from kombu.exceptions import KombuError
from redis.exceptions import RedisError

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.errors import UnavailableError
from ctxpipe.core.models import CommitResult
from ctxpipe.observability.spans import phase_span
from ctxpipe.service import CommitNotFoundError, CommitView
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.commit_list import CommitSummary, commits_of_owner
from ctxpipe.storage.db import Database


class BrokerUnavailableError(UnavailableError):
    def __init__(self, commit_id: str, exc: BaseException) -> None:
        super().__init__(
            f"commit {commit_id} is recorded but could not be enqueued (broker unreachable: "
            f"{' '.join(str(exc).split())}); submit it again with the same commit id"
        )


class CeleryDispatcher:
    def __init__(self, settings: Settings, db: Database | None = None) -> None:
        self._settings = settings
        self._db = db or Database.from_settings(settings)
        self._ledger = CommitLedger(self._db, schema=settings.db_schema)

    def submit(self, req: CommitRequest) -> str:
        # the commit's `commit.submit` span: the start message carries its trace context
        with phase_span("submit", req.commit_id):
            return self._submit(req)

    def _submit(self, req: CommitRequest) -> str:
        from ctxpipe.commit import steps
        from tasks.app import app
        from tasks.queues import START

        # back-pressure: over the cap, BacklogFullError and nothing recorded or sent
        new = steps.submit(
            self._ledger,
            req,
            self._settings.limits,
            max_pending=self._settings.commit.max_pending,
        )
        row = None if new else self._ledger.get(req.commit_id)
        if new or (row is not None and row.phase == "enqueued"):
            # fire-and-forget: no result subscription is left behind in the producer. A commit
            # recorded earlier whose start message never left (broker down) is started again.
            try:
                app.send_task(START, args=[req.commit_id, "archive"], ignore_result=True)
            except (KombuError, RedisError, OSError) as exc:
                raise BrokerUnavailableError(req.commit_id, exc) from exc
        return req.commit_id

    def get(self, commit_id: str) -> CommitView:
        row = self._ledger.get(commit_id)
        if row is None:
            raise CommitNotFoundError(commit_id)
        return CommitView(
            commit_id=commit_id,
            account_id=row.account_id,
            user_id=row.user_id,
            agent_id=row.agent_id,
            session_id=row.session_id,
            phase=row.phase,
            status=row.status,
            extractors=row.extractors,
            error=row.error,
            error_phase=row.error_phase,
            result=CommitResult.model_validate(row.result) if row.result else None,
            timings=row.timings,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    def recent(
        self, account_id: str, user_id: str | None, agent_id: str | None, limit: int
    ) -> list[CommitSummary]:
        return commits_of_owner(
            self._db,
            self._settings.db_schema,
            account_id,
            user_id=user_id,
            agent_id=agent_id,
            limit=limit,
        )
