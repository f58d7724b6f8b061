"""Submitting a commit to the ledger: a commit id is an idempotency key (refused when reused by
another tenant), input over the limits is refused before anything is recorded, and
back-pressure refuses a new commit over the cap."""

from __future__ import annotations

import pytest
from ledger_world import Ledger, make_req

from ctxpipe.commit import steps
from ctxpipe.commit.backlog import DEFAULT_RETRY_AFTER_S
from ctxpipe.core.config import LimitsConfig
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import BacklogFullError
from ctxpipe.core.session import InputLimitError


def test_a_commit_id_reused_by_another_tenant_is_refused(ledger: Ledger) -> None:
    req = make_req("shared-key")
    assert steps.submit(ledger, req)
    assert not steps.submit(ledger, req)  # the same commit again: idempotent
    row = ledger.get("shared-key")
    # another account, or another user, agent or session: refused, the ledger row untouched
    for change in (
        {"account_id": "evil"},
        {"user_id": "mallory"},
        {"agent_id": "other"},
        {"session_id": "s-other"},
    ):
        theirs = req.model_copy(update={"ctx": req.ctx.model_copy(update=change)})
        with pytest.raises(steps.CommitIdConflictError):
            steps.submit(ledger, theirs)
    assert ledger.get("shared-key") == row


def test_submit_refuses_an_input_over_the_limits_before_recording_it(ledger: Ledger) -> None:
    req = make_req("too-big")
    with pytest.raises(InputLimitError, match="CTXPIPE_LIMITS__MAX_MESSAGES"):
        steps.submit(ledger, req, LimitsConfig(max_messages=1))
    with pytest.raises(InputLimitError, match="CTXPIPE_LIMITS__MAX_SESSION_CHARS"):
        steps.submit(ledger, req, LimitsConfig(max_session_chars=1))
    assert ledger.get("too-big") is None
    assert steps.submit(ledger, req, LimitsConfig())


def test_submit_over_the_cap_is_refused_and_records_nothing(ledger: Ledger) -> None:
    assert steps.submit(ledger, make_req("c1", "s1"), max_pending=2)
    assert steps.submit(ledger, make_req("c2", "s2"), max_pending=2)
    with pytest.raises(BacklogFullError) as err:
        steps.submit(ledger, make_req("c3", "s3"), max_pending=2)
    assert err.value.pending == 2 and err.value.cap == 2
    assert err.value.retry_after_s == DEFAULT_RETRY_AFTER_S  # nothing drained yet
    assert err.value.oldest_age_s is not None and err.value.oldest_age_s >= 0
    msg = str(err.value)
    assert "backlog full" in msg and "nothing was recorded" in msg and "submit again in" in msg
    assert ledger.get("c3") is None
    # a commit already accepted is never refused: resubmitting it is idempotent
    assert steps.submit(ledger, make_req("c1", "s1"), max_pending=2) is False


def test_finished_commits_free_their_place_and_set_the_drain_rate(ledger: Ledger) -> None:
    for i in range(3):
        steps.submit(ledger, make_req(f"c{i}", f"s{i}"), max_pending=3)
    ledger.advance("c0", CommitPhase.REGISTERED, status="success")
    ledger.fail("c1", "archive", "boom")
    b = ledger.backlog()
    assert b.in_flight == 1 and b.finished_recently == 2
    assert steps.submit(ledger, make_req("c3", "s3"), max_pending=3)
    assert steps.submit(ledger, make_req("c4", "s4"), max_pending=3)
    with pytest.raises(BacklogFullError) as err:
        steps.submit(ledger, make_req("c5", "s5"), max_pending=3)
    assert err.value.retry_after_s == 30.0  # 2 finished per minute, one over the cap


def test_cap_zero_never_refuses(ledger: Ledger) -> None:
    for i in range(50):
        assert steps.submit(ledger, make_req(f"c{i}", f"s{i}"), max_pending=0)
    assert ledger.backlog().in_flight == 50
