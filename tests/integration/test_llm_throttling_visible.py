"""What the limiter counted shows in `ctxpipe status` (text and JSON) and in the API's
`/metrics`: the cluster-wide counters in Redis, after real calls to a server that answers 429
with `Retry-After` to half of them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from typer.testing import CliRunner

from ctxpipe.core.models import ArchiveSummary
from ctxpipe.providers.openai_llm import OpenAICompatibleLLM
from ctxpipe.runtime import Runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _flaky_llm import FlakyLLMServer  # noqa: E402

VARIABLES = {"messages": [], "tools": [], "session_id": "s1", "max_tokens": 100}


def test_status_and_metrics_show_the_throttling(make_settings, clean_db, clean_redis):
    from ctxpipe.api.app import pipeline_collector
    from ctxpipe.api.metrics import ApiMetrics
    from ctxpipe.cli import app
    from ctxpipe.service import ContextEngineService

    with FlakyLLMServer(rate_limited=0.5, malformed=0.0, retry_after="0", seed=11) as server:
        settings = make_settings(
            llm_provider="openai",
            llm_base_url=server.url,
            llm_api_key=SecretStr("sk-visible"),
            llm_requests_per_minute=100,
            llm_max_concurrency=3,
        )
        llm = OpenAICompatibleLLM(settings)
        for _ in range(6):
            llm.complete_json_sync("compression.archive_summary", VARIABLES, ArchiveSummary)
    seen_429 = server.tally.rate_limited
    assert seen_429 > 0

    env = {
        "CTXPIPE_DATABASE_URL": settings.database_url,
        "CTXPIPE_FS_ROOT": str(settings.fs_root),
        "CTXPIPE_REDIS_URL": settings.redis_url,
        "CTXPIPE_DB_SCHEMA": settings.db_schema,
        "CTXPIPE_LLM_PROVIDER": "openai",
        "CTXPIPE_LLM_BASE_URL": server.url,
        "CTXPIPE_LLM_API_KEY": "sk-visible",
        "CTXPIPE_LLM_REQUESTS_PER_MINUTE": "100",
        "CTXPIPE_LLM_MAX_CONCURRENCY": "3",
    }
    runner = CliRunner()
    out = runner.invoke(app, ["status", "--json"], env=env)
    assert out.exit_code in (0, 1), out.output  # 1: the replica is not in sync, or no broker
    shown = json.loads(out.stdout)["llm_throttling"]
    assert shown["backend"] == "redis" and shown["requests_per_window"] == 100
    assert shown["http_429"] == shown["retry_after_honoured"] == seen_429
    assert shown["requests_in_window"] == len(server.tally.arrivals)
    assert "sk-visible" not in out.stdout
    out = runner.invoke(app, ["status"], env=env)
    line = next(row for row in out.stdout.splitlines() if "LLM throttling" in row)
    assert "rpm 100" in line and "concurrency 3" in line and f"{seen_429} × 429" in line

    rt = Runtime(settings)
    metrics = ApiMetrics()
    metrics.add_pipeline(pipeline_collector(settings, ContextEngineService(rt)))
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition().decode())}
    rt.close()
    assert families["ctxpipe_llm_limiter_up"].samples[0].value == 1
    http_429 = families["ctxpipe_llm_http_429"]
    assert http_429.type == "counter" and http_429.samples[0].value == seen_429
    assert server.url.rstrip("/") in http_429.samples[0].labels["provider"]
    limit = families["ctxpipe_llm_requests_per_minute_limit"].samples[0].value
    assert limit == 100
    assert families["ctxpipe_llm_retry_after_honoured"].samples[0].value == seen_429


def test_the_rules_provider_shows_no_throttling(make_settings, clean_db):
    from ctxpipe.index.status import collect_status

    settings = make_settings()
    rt = Runtime(settings)
    st = collect_status(settings, db=rt.db, fs=rt.fs, queues=())
    rt.close()
    assert st.llm_throttling is None and "redis" not in st.errors
