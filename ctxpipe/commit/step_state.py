"""What a step reads before it runs: its commit's request and stored outputs, in one ledger
round trip that also counts the delivery of its task message (`Delivery`).

A commit already marked failed is never advanced again, and a task message the broker
redelivered more than `MAX_DELIVERIES` times without its step finishing fails the commit (each
delivery killed its worker process: running it again would loop forever).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.failures import CommitAlreadyFailedError
from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.commit.outputs import PhaseOutputs
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import CommitError

T = TypeVar("T")

MAX_DELIVERIES = 5  # a message redelivered this many times unfinished is failed, not re-run


@dataclass(frozen=True)
class Delivery:
    """One delivery of a step's task message: the task's short name ("extract_profile"), its
    retry number and whether the broker `redelivered` it (the same message, taken before by a
    worker process that never acknowledged it: a pool process lost while running it). The
    step's first ledger read counts it while the step has not finished, so a delivery costs
    no round trip of its own: first deliveries as `attempts["<task>#<retry>"]`, redeliveries
    as `attempts["<task>#<retry> redelivered"]`. A message redelivered more than
    MAX_DELIVERIES times without its step finishing fails the commit (its every delivery
    killed the worker process: running it again would loop forever). Only redeliveries
    count towards that bound: a new message of the same step — a re-drive of the reaper
    after a whole worker node died, which keeps its own bound on the deaths that caught the
    step running — is a duplicate that may run beside the first, not a sign of a poison
    task. A finished step's redelivery only replays its output."""

    task: str
    retry: int = 0
    redelivered: bool = False

    @property
    def key(self) -> str:
        return f"{self.task}#{self.retry}" + (" redelivered" if self.redelivered else "")

    def of(self, task: str) -> Delivery:
        """The delivery of step `task` run inside this one's task (the fused canvas)."""
        return Delivery(task, self.retry, self.redelivered)


def read_state(
    c: CommitComponents,
    ledger: LedgerPort,
    commit_id: str,
    keys: list[str],
    delivery: Delivery | None = None,
    *,
    phase: str = "",
    done: str = "",
) -> tuple[CommitRequest, datetime, PhaseOutputs]:
    """The request, its creation time and whichever of the outputs `keys` exist, parsed (one
    round trip, which also counts `delivery`). A commit already marked failed (for example by
    the sweeper) is never advanced again: its late tasks write nothing. A redelivery over
    MAX_DELIVERIES whose step has not finished (`done`: the key of its output) fails the
    commit in `phase`."""
    key = delivery.key if delivery is not None else None
    state = ledger.state(commit_id, keys, key, done)
    if state is None:
        raise CommitError(f"unknown commit {commit_id}", phase="enqueued")
    if state.phase == CommitPhase.FAILED.value:
        raise CommitAlreadyFailedError(commit_id)
    if delivery is not None and delivery.redelivered and state.deliveries > MAX_DELIVERIES:
        msg = (
            f"{delivery.task} was redelivered {state.deliveries} times without finishing "
            "(its worker process was lost each time; see the worker logs)"
        )
        ledger.fail(commit_id, phase, msg)
        raise CommitError(msg, phase=phase)
    outputs = PhaseOutputs.from_stored(state.outputs)
    return c.step_cache.request(commit_id, state.request), state.created_at, outputs


def need(output: T | None, key: str, phase: str) -> T:
    """A stored output the step cannot run without (a `CommitError` in `phase` when absent)."""
    if output is None:
        raise CommitError(f"{key} output missing", phase=phase)
    return output
