"""Open sessions on the deployed pipeline: `ctxpipe session add` (a separate process) appends
through the Celery dispatcher, the cut commit runs on real workers, and the idle job
(`ctxpipe.maintenance.cut_idle_sessions`, sent as beat sends it) cuts and commits the rest."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import psycopg
from celery_stack import (
    SAMPLE_SESSION,
    call_task,
    ctxpipe,
    start_worker,
    wait_commit,
    write_session,
)


def cuts(url: str) -> list[tuple[str, bool]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT commit_id, submitted_at IS NOT NULL FROM ctx.open_session_cuts "
            "ORDER BY created_at"
        ).fetchall()
    return [(str(c), bool(s)) for c, s in rows]


def test_appended_messages_are_cut_and_committed_by_the_workers(  # type: ignore[no-untyped-def]
    make_settings, clean_db, clean_redis, tmp_path: Path
) -> None:
    s = make_settings(session_max_messages=3, session_idle_commit_s=1.0)
    s.fs_root.mkdir(parents=True, exist_ok=True)
    workers = [
        start_worker(s, "commit,maintenance", 2, tmp_path),
        start_worker(s, "extract", 2, tmp_path),
    ]
    try:
        path = write_session(tmp_path / "turns.json", {**SAMPLE_SESSION, "session_id": "open-e2e"})
        added = ctxpipe(s, "session", "add", str(path), "--json")
        assert added.returncode == 0, added.stderr
        out = json.loads(added.stdout)
        assert (out["appended"], out["open_messages"]) == (5, 2)
        (first,) = out["commit_ids"]
        row = wait_commit(s, first)
        assert row["status"] == "success", row

        again = json.loads(ctxpipe(s, "session", "add", str(path), "--json").stdout)
        assert (again["appended"], again["duplicates"], again["commit_ids"]) == (0, 5, [])

        time.sleep(1.5)  # idle for longer than CTXPIPE_SESSION_IDLE_COMMIT_S
        call_task(s, "ctxpipe.maintenance.cut_idle_sessions", [])
        deadline = time.monotonic() + 60
        while len(cuts(s.database_url)) < 2 or not all(ok for _, ok in cuts(s.database_url)):
            assert time.monotonic() < deadline, cuts(s.database_url)
            time.sleep(0.2)
        (_, _), (second, _) = cuts(s.database_url)
        assert wait_commit(s, second)["status"] == "success"

        with psycopg.connect(s.database_url) as conn:
            rows = conn.execute("SELECT request FROM ctx.commits").fetchall()
        seen = Counter(m["id"] for (req,) in rows for m in req["messages"])
        assert seen == Counter({f"m{i}": 1 for i in range(1, 6)})
    finally:
        for w in workers:
            w.stop()
