"""What commits cost (LLM calls and tokens, per phase and in aggregate) and back-pressure at
submit, as status, the dispatcher, the Celery task, the API, the metrics and the CLI show them,
on the real PostgreSQL ledger and Redis broker. The ledger's own sums and refusals, the same
on both ledgers, are tests/integration/ledger/."""

from __future__ import annotations

import pytest

from ctxpipe.commit import steps
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.errors import BacklogFullError
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


def test_status_reports_the_ledgers_cost_and_backlog(make_settings, clean_db):
    """The sums themselves are tests/integration/ledger/; status shows the ledger's."""
    settings = make_settings(redis=False)
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    run_steps(rt, ledger, make_req("cost-1"))
    steps.submit(ledger, make_req("cost-2", session="s2"))  # accepted, not run
    cost = ledger.llm_cost()
    assert cost.commits == 1 and cost.llm_calls >= 1  # the session's one extraction call
    st = collect_status(settings, db=rt.db, fs=rt.fs, queues=())
    assert st.llm_cost == cost and st.commit_backlog.in_flight == 1
    rt.close()


def capped(settings: Settings, cap: int) -> Settings:
    return settings.model_copy(
        update={"commit": settings.commit.model_copy(update={"max_pending": cap})}
    )


@pytest.fixture
def no_broker_sends(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The start messages the dispatcher sends (recorded, not sent: no worker runs here)."""
    from tasks.app import app

    sent: list[tuple] = []
    monkeypatch.setattr(app, "send_task", lambda *a, **k: sent.append((a, k)))
    return sent


def test_submit_over_the_cap_is_refused_and_records_nothing(
    make_settings, clean_db, clean_redis, no_broker_sends
):
    from tasks.dispatcher import CeleryDispatcher

    settings = capped(make_settings(), 2)
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    dispatcher = CeleryDispatcher(settings, rt.db)
    assert dispatcher.submit(make_req("bp-1")) == "bp-1"
    assert dispatcher.submit(make_req("bp-2", session="s2")) == "bp-2"
    with pytest.raises(BacklogFullError) as err:
        dispatcher.submit(make_req("bp-3", session="s3"))
    assert err.value.pending == 2 and err.value.cap == 2 and err.value.retry_after_s >= 1
    assert ledger.get("bp-3") is None  # nothing recorded: resubmit later
    assert len(no_broker_sends) == 2  # and nothing sent
    assert ledger.backlog().in_flight == 2

    # a commit already accepted is never refused (resubmitting is idempotent)
    assert dispatcher.submit(make_req("bp-1")) == "bp-1"
    assert ledger.backlog().in_flight == 2

    # one finishes: its place is free, and the drain rate shows in the backlog
    ledger.advance("bp-1", CommitPhase.REGISTERED, status="success")
    b = ledger.backlog()
    assert b.in_flight == 1 and b.finished_recently == 1 and b.oldest_age_s is not None
    assert dispatcher.submit(make_req("bp-3", session="s3")) == "bp-3"
    assert ledger.get("bp-3") is not None
    with pytest.raises(BacklogFullError) as err:
        dispatcher.submit(make_req("bp-4", session="s4"))
    assert err.value.retry_after_s == 60.0  # one commit per minute drained, one over the cap
    rt.close()


def test_the_celery_submit_task_refuses_over_the_cap(make_settings, clean_db, clean_redis):
    """Producers that send `ctxpipe.commit.submit` get the same refusal from the task."""
    from tasks import commit as commit_tasks
    from tasks.app import app

    settings = capped(make_settings(), 1)
    saved = app.conf.ctxpipe_settings
    app.conf.ctxpipe_settings = settings
    try:
        rt = Runtime(settings)
        ledger = CommitLedger(rt.db)
        steps.submit(ledger, make_req("task-1"))
        with pytest.raises(BacklogFullError):
            commit_tasks.enqueue(make_req("task-2", session="s2"))
        assert ledger.get("task-2") is None
        rt.close()
    finally:
        app.conf.ctxpipe_settings = saved


def test_api_refuses_over_the_cap_with_503_and_retry_after(
    make_settings, clean_db, clean_redis, no_broker_sends
):
    from fastapi.testclient import TestClient

    from ctxpipe.api import create_app
    from ctxpipe.api.keys import KeySpec, KeyStore
    from ctxpipe.service import ContextEngineService
    from tasks.dispatcher import CeleryDispatcher

    settings = capped(make_settings(api_key_cache_s=0.0), 1)
    rt = Runtime(settings)
    service = ContextEngineService(rt, CeleryDispatcher(settings, rt.db))
    store = KeyStore(rt.db, schema=settings.db_schema, cache_s=0.0)
    key = store.create(KeySpec(account_id="acme", user_id="rita", scopes=["commit"])).key
    headers = {"Authorization": f"Bearer {key}"}
    body = {"session_id": "s1", "messages": MESSAGES}
    with TestClient(create_app(settings, service, key_store=store)) as client:
        ok = client.post("/v1/commits", json={**body, "commit_id": "api-1"}, headers=headers)
        assert ok.status_code == 202, ok.text
        refused = client.post(
            "/v1/commits", json={**body, "session_id": "s2", "commit_id": "api-2"}, headers=headers
        )
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        err = refused.json()
        assert set(err) == {"error"} and err["error"]["code"] == "backlog_full"
        assert err["error"]["details"]["max_pending"] == 1
        assert err["error"]["details"]["pending"] == 1
        assert "nothing was recorded" in err["error"]["message"]
        assert CommitLedger(rt.db).get("api-2") is None and len(no_broker_sends) == 1
        # the same commit id again is accepted (idempotent), not refused
        again = client.post("/v1/commits", json={**body, "commit_id": "api-1"}, headers=headers)
        assert again.status_code == 202

        text = client.get("/metrics").text
        assert "ctxpipe_commits_in_flight 1.0" in text
        assert "ctxpipe_commits_max_pending 1.0" in text
        assert "ctxpipe_commits_oldest_in_flight_seconds" in text
        assert 'ctxpipe_queue_messages{queue="commit"}' in text


def test_metrics_export_cost_per_phase_as_counters(make_settings, clean_db, clean_redis):
    from prometheus_client.parser import text_string_to_metric_families

    from ctxpipe.api.app import pipeline_collector
    from ctxpipe.api.metrics import ApiMetrics
    from ctxpipe.service import ContextEngineService

    settings = make_settings()
    rt = Runtime(settings)
    ledger = CommitLedger(rt.db)
    run_steps(rt, ledger, make_req("m-1"))
    metrics = ApiMetrics()
    metrics.add_pipeline(pipeline_collector(settings, ContextEngineService(rt)))
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    stats = ledger.get("m-1").result["stats"]  # type: ignore[union-attr]
    calls = {s.labels["phase"]: s.value for s in families["ctxpipe_llm_calls"].samples}
    assert families["ctxpipe_llm_calls"].type == "counter"
    assert calls == {k: v["calls"] for k, v in stats["llm_by_phase"].items()}
    prompt = families["ctxpipe_llm_prompt_tokens"].samples
    assert sum(s.value for s in prompt) == stats["llm_prompt_tokens"]
    assert families["ctxpipe_committed_messages"].samples[0].value == len(MESSAGES)
    assert families["ctxpipe_commits_in_flight"].samples[0].value == 0
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
    for phase in ("archive", "total"):
        assert phase in out.stdout

    out = runner.invoke(app, ["status", "--json"], env=env)
    assert out.exit_code == 0, out.output
    st = json.loads(out.stdout)
    assert st["commit_backlog"]["in_flight"] == 1
    assert st["llm_cost"]["commits"] == 1 and st["llm_cost"]["llm_calls"] >= 1
    by_phase = st["llm_cost"]["by_phase"]
    assert sum(p["calls"] for p in by_phase.values()) == st["llm_cost"]["llm_calls"]
    assert st["commit_backlog"]["max_pending"] == settings.commit.max_pending
    out = runner.invoke(app, ["status"], env=env)
    assert "1 in flight" in out.stdout and "calls and" in out.stdout
    assert "by phase" in out.stdout and "archive" in out.stdout

    out = runner.invoke(app, ["commits", "show", "cli-1", "--json"], env=env)
    shown = json.loads(out.stdout)["result"]["stats"]
    assert shown["llm_by_phase"]["archive"]["calls"] >= 1
    assert sum(p["calls"] for p in shown["llm_by_phase"].values()) == shown["llm_calls"]
    rt.close()


def test_cli_commit_over_the_cap_says_why_and_exits_75(
    make_settings, clean_db, clean_redis, no_broker_sends, tmp_path
):
    import json

    from typer.testing import CliRunner

    from ctxpipe.cli import app

    settings = make_settings()
    rt = Runtime(settings)
    steps.submit(CommitLedger(rt.db), make_req("cli-bp-1"))
    session = tmp_path / "session.json"
    session.write_text(
        json.dumps(
            {
                "account_id": "acme",
                "user_id": "rita",
                "session_id": "s9",
                "commit_id": "cli-bp-2",
                "messages": MESSAGES,
            }
        )
    )
    env = {
        "CTXPIPE_DATABASE_URL": settings.database_url,
        "CTXPIPE_FS_ROOT": str(settings.fs_root),
        "CTXPIPE_REDIS_URL": settings.redis_url,
        "CTXPIPE_COMMIT__MAX_PENDING": "1",
    }
    out = CliRunner().invoke(app, ["commit", str(session)], env=env)
    assert out.exit_code == 75, out.output
    assert "commit backlog full" in out.output and "submit again in" in out.output
    assert CommitLedger(rt.db).get("cli-bp-2") is None and no_broker_sends == []
    out = CliRunner().invoke(app, ["status", "--json"], env=env)
    backlog = json.loads(out.stdout)["commit_backlog"]
    assert backlog["in_flight"] == 1 and backlog["max_pending"] == 1
    assert backlog["oldest_age_s"] >= 0 and "drain_per_s" in backlog
    rt.close()
