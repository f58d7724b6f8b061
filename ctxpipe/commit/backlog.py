"""Back-pressure at submit time, decided on the commit ledger.

Producers that submit faster than the workers drain would make the broker grow without bound.
The ledger is the durable record of every commit accepted and not finished yet (phase neither
`registered` nor `failed`): a new commit is recorded only while fewer than
`CommitConfig.max_pending` are in flight — the count and the insert are one statement, so a
refused submit records nothing and sends nothing. A commit id already in the ledger is never
refused (resubmitting it is idempotent and adds nothing). The refusal carries a retry-after
estimated from how many commits finished in the last minute (the drain rate).
"""

from __future__ import annotations

import math

from ctxpipe.core.errors import BacklogFullError
from ctxpipe.storage.commit_ledger import CommitBacklog

DEFAULT_RETRY_AFTER_S = 5.0  # nothing finished lately: the drain rate is unknown
MAX_RETRY_AFTER_S = 300.0


def admits(in_flight: int, cap: int) -> bool:
    """Whether a new commit may be recorded with `in_flight` commits unfinished (`cap` 0: no
    cap). At most `cap` commits are ever in flight."""
    return cap <= 0 or in_flight < cap


def retry_after_s(backlog: CommitBacklog, cap: int) -> float:
    """Seconds until one more commit is expected to fit under `cap`, at the drain rate the
    ledger saw over its window (at least 1 s, at most 5 minutes)."""
    rate = backlog.drain_per_s
    if rate <= 0:
        return DEFAULT_RETRY_AFTER_S
    excess = backlog.in_flight - cap + 1
    return float(min(MAX_RETRY_AFTER_S, max(1.0, math.ceil(excess / rate))))


def refusal(backlog: CommitBacklog, cap: int) -> BacklogFullError:
    """The error a refused submit raises, from a fresh reading of the backlog."""
    return BacklogFullError(
        backlog.in_flight, cap, retry_after_s(backlog, cap), backlog.oldest_age_s
    )


__all__ = [
    "DEFAULT_RETRY_AFTER_S",
    "MAX_RETRY_AFTER_S",
    "BacklogFullError",
    "admits",
    "refusal",
    "retry_after_s",
]
