"""The submission of a commit: its ledger row, recorded once per commit id.

The first thing of every commit, before any step runs: the request checked against the size
limits, refused when the backlog is full, and recorded; a commit id is an idempotency key.
"""

from __future__ import annotations

from ctxpipe.commit import backlog, big_messages
from ctxpipe.commit.failures import CommitIdConflictError
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import LimitsConfig


def submit(
    ledger: LedgerPort,
    req: CommitRequest,
    limits: LimitsConfig | None = None,
    *,
    max_pending: int = 0,
) -> bool:
    """Record a commit request; False when this very commit was already submitted.

    `limits`: the size limits checked before anything is recorded (InputLimitError).
    `max_pending`: back-pressure — a new commit is refused with `BacklogFullError` (nothing
    recorded) while that many commits are in flight; 0: no cap (see `commit.backlog`).

    A commit id is an idempotency key: reusing it for another account, user, agent or session is
    refused (it would silently drop that session and show another tenant's result)."""
    if limits is not None:  # a long message is recorded as its bounded excerpt, never refused
        req = big_messages.admit(req, limits)
    if ledger.create(
        req.commit_id,
        req.ctx.model_dump(mode="json"),
        req.model_dump(mode="json"),
        max_pending=max_pending,
    ):
        return True
    row = ledger.get(req.commit_id)
    if row is None and max_pending > 0:  # not recorded and not known: over the cap
        raise backlog.refusal(ledger.backlog(), max_pending)
    if row is not None:
        theirs = (row.account_id, row.user_id, row.agent_id, row.session_id)
        ours = (req.ctx.account_id, req.ctx.user_id, req.ctx.agent_id, req.ctx.session_id)
        if theirs != ours:
            raise CommitIdConflictError(req.commit_id)
    return False
