"""What commits cost (LLM calls and tokens, per phase and in aggregate) and back-pressure at
submit, against the real PostgreSQL ledger and the real Redis broker."""

from __future__ import annotations

import pytest
import redis

from ctxpipe.commit import steps
from ctxpipe.commit.backlog import BacklogFullError
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import RequestContext
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.index.status import collect_status
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger

MESSAGES = [
    {"id": "m1", "role": "user", "content": "I'm a nurse in Porto and I love surfing."},
    {"id": "m2", "role": "assistant", "content": "Surfing in Porto sounds wonderful."},
    {"id": "m3", "role": "user", "content": "I always surf before my night shifts."},
    {"id": "m4", "role": "assistant", "content": "Night shifts and dawn surf: a good rhythm."},
]


def make_req(commit_id: str, session: str = "s1") -> CommitRequest:
    ctx = RequestContext(account_id="acme", user_id="rita", agent_id="a", session_id=session)
    return CommitRequest(commit_id=commit_id, ctx=ctx, messages=MESSAGES)  # type: ignore[arg-type]


def run_steps(rt: Runtime, ledger: CommitLedger, req: CommitRequest) -> None:
    c = rt.components()
    steps.submit(ledger, req)
    steps.archive_step(c, ledger, req.commit_id)
    for n in EXTRACTOR_NAMES:
        steps.extract_step(c, ledger, req.commit_id, n)
    steps.plan_step(c, ledger, req.commit_id)
    steps.write_step(c, ledger, req.commit_id)
    steps.register_step(c, ledger, req.commit_id)


def test_cost_per_phase_in_the_ledger_and_in_aggregate(make_settings, clean_db):
    settings = make_settings(redis=False)
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    run_steps(rt, ledger, make_req("cost-1"))
    run_steps(rt, ledger, make_req("cost-2", session="s2"))
    steps.submit(ledger, make_req("cost-3", session="s3"))  # accepted, not run

    stats = ledger.get("cost-1").result["stats"]  # type: ignore[union-attr]
    by_phase = stats["llm_by_phase"]
    assert {"archive", *(f"extract_{n}" for n in EXTRACTOR_NAMES)} <= set(by_phase)
    assert sum(p["calls"] for p in by_phase.values()) == stats["llm_calls"] >= 5
    assert sum(p["prompt_tokens"] for p in by_phase.values()) == stats["llm_prompt_tokens"]

    cost = ledger.llm_cost()
    second = ledger.get("cost-2").result["stats"]  # type: ignore[union-attr]
    assert cost.commits == 2 and cost.messages == 2 * len(MESSAGES)
    assert cost.llm_calls == stats["llm_calls"] + second["llm_calls"]
    assert cost.calls_per_100_messages == pytest.approx(100 * cost.llm_calls / 8)

    backlog = ledger.backlog()
    assert backlog.in_flight == 1 and backlog.oldest_age_s is not None
    assert backlog.oldest_age_s >= 0

    st = collect_status(settings, db=rt.db, fs=rt.fs, queues=())
    assert st.llm_cost == cost and st.commit_backlog.in_flight == 1
    rt.close()


def test_submit_over_the_backlog_cap_is_refused_and_records_nothing(
    make_settings, clean_db, clean_redis, monkeypatch
):
    from tasks.app import app
    from tasks.dispatcher import CeleryDispatcher

    sent: list[tuple] = []
    monkeypatch.setattr(app, "send_task", lambda *a, **k: sent.append((a, k)))

    settings = make_settings()
    settings = settings.model_copy(
        update={"commit": settings.commit.model_copy(update={"max_backlog": 3})}
    )
    rt = Runtime(settings)
    broker = redis.Redis.from_url(settings.redis_url)
    broker.rpush("extract", *[b"{}"] * 5)  # a backlog the workers have not drained
    dispatcher = CeleryDispatcher(settings, rt.db)
    with pytest.raises(BacklogFullError) as err:
        dispatcher.submit(make_req("bp-1"))
    assert err.value.depth == 5 and err.value.cap == 3
    assert CommitLedger(rt.db).get("bp-1") is None  # nothing recorded: resubmit later
    assert sent == []

    broker.delete("extract")  # drained
    dispatcher._gate._last = None  # the next reading is fresh, not the cached one
    assert dispatcher.submit(make_req("bp-1")) == "bp-1"
    assert CommitLedger(rt.db).get("bp-1") is not None and len(sent) == 1
    broker.close()
    rt.close()


def test_cli_shows_cost_per_phase_backlog_and_aggregate(make_settings, clean_db, redis_url):
    import json

    from typer.testing import CliRunner

    from ctxpipe.cli import app

    settings = make_settings(redis=False)
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    run_steps(rt, ledger, make_req("cli-1"))
    steps.submit(ledger, make_req("cli-2", session="s2"))
    env = {
        "CTXPIPE_DATABASE_URL": settings.database_url,
        "CTXPIPE_FS_ROOT": str(settings.fs_root),
        "CTXPIPE_REDIS_URL": redis_url,
    }
    runner = CliRunner()
    out = runner.invoke(app, ["commits", "show", "cli-1"], env=env)
    assert out.exit_code == 0, out.output
    assert "LLM cost: phase" in out.stdout
    for phase in ("archive", "extract_profile", "total"):
        assert phase in out.stdout

    out = runner.invoke(app, ["status", "--json"], env=env)
    assert out.exit_code == 0, out.output
    st = json.loads(out.stdout)
    assert st["commit_backlog"]["in_flight"] == 1
    assert st["llm_cost"]["commits"] == 1 and st["llm_cost"]["llm_calls"] >= 5
    out = runner.invoke(app, ["status"], env=env)
    assert "1 in flight" in out.stdout and "calls and" in out.stdout
    rt.close()
