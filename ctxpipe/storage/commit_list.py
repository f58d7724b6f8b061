"""The commits of one owner, newest first: what a commit list shows (phase, status, the
phase timings, per-extractor status, the LLM usage of the result), read from the ledger."""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import dict_row
from pydantic import BaseModel, Field

from ctxpipe.core.models import CommitStats
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

# `timings` keys: milliseconds by phase ("archive_ms", "extract_profile_ms", ...) and the epoch
# second a commit was written ("written_at")
Timings = dict[str, int | float]


class CommitSummary(BaseModel):
    """One commit as a list shows it."""

    commit_id: str
    account_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    phase: str
    status: str | None = None
    extractors: dict[str, dict] = Field(default_factory=dict)
    timings: Timings = Field(default_factory=dict)
    error: str | None = None
    error_phase: str | None = None
    stats: CommitStats | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.phase in ("registered", "failed")


def commit_list_query(user_id: str | None, agent_id: str | None) -> str:
    """The named query of a list of this shape: one per shape, each with its filters as index
    conditions, so a generic plan (a statement prepared on the server) still reads the index."""
    if user_id is not None:
        return "commits_of_user_agent" if agent_id is not None else "commits_of_user"
    return "commits_of_agent" if agent_id is not None else "commits_of_account"


def commits_of_owner(
    db: Database,
    schema: str,
    account_id: str,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    limit: int = 50,
) -> list[CommitSummary]:
    """The latest `limit` commits of `account_id` (of `user_id` / `agent_id` when given)."""
    params = {"account_id": account_id, "user_id": user_id, "agent_id": agent_id, "limit": limit}
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        query = Queries(schema)[commit_list_query(user_id, agent_id)]
        rows = cur.execute(query, params).fetchall()
    return [CommitSummary.model_validate(r) for r in rows]


__all__ = ["CommitSummary", "Timings", "commit_list_query", "commits_of_owner"]
