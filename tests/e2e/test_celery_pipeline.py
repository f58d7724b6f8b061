"""The commit workflow on real Celery workers, real Redis and real PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from celery_stack import (
    ROOT,
    SAMPLE_SESSION,
    call_task,
    celery,
    ctxpipe,
    ledger_row,
    outbox_ids,
    settings_env,
    wait_commit,
    workers,
    write_session,
)

SESSION = SAMPLE_SESSION


def session(**over):  # type: ignore[no-untyped-def]
    return {**SESSION, **over}


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".locks" not in p.parts and p.name != ".lock"
    }


@pytest.fixture
def stack_settings(make_settings, clean_db, clean_redis, tmp_path):  # type: ignore[no-untyped-def]
    s = make_settings(stuck_commit_after_s=5.0)
    s.fs_root.mkdir(parents=True, exist_ok=True)
    s.var_dir.mkdir(parents=True, exist_ok=True)
    return s


def commit_wait(settings, path: Path, *extra: str) -> dict:  # type: ignore[no-untyped-def]
    proc = ctxpipe(settings, "commit", str(path), "--wait", "--json", *extra)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_commit_through_celery_matches_in_process(stack_settings, tmp_path):
    f = write_session(tmp_path / "s.json", session(commit_id="cel-1"))
    with workers(stack_settings, tmp_path, [("commit,extract,maintenance", 4)]):
        result = commit_wait(stack_settings, f)
    assert result["status"] == "success"
    assert result["stats"]["nodes_created"] >= 3
    row = ledger_row(stack_settings, "cel-1")
    assert row["phase"] == "registered"
    assert set(row["extractors"]) == {"profile", "preferences", "entity_event", "procedure"}
    celery_tree = snapshot(stack_settings.fs_root)

    # the very same commit in process, on a fresh FS, writes the same files
    inline_root = tmp_path / "inline-fs"
    env_settings = stack_settings.model_copy(update={"fs_root": inline_root})
    proc = ctxpipe(env_settings, "commit", str(f), "--inline", "--json", "--skip-dedup")
    assert proc.returncode == 0, proc.stderr
    assert set(snapshot(inline_root)) == set(celery_tree)


def test_four_extractors_overlap_in_time(stack_settings, tmp_path):
    """With a call per extractor (each in its own task), the four calls run in parallel."""
    per_extractor = stack_settings.commit.model_copy(update={"extraction_calls": "extractor"})
    s = stack_settings.model_copy(update={"llm_simulated_latency_s": 1.0, "commit": per_extractor})
    f = write_session(tmp_path / "s.json", session(commit_id="cel-par"))
    with workers(s, tmp_path, [("commit,maintenance", 2), ("extract", 4)]):
        result = commit_wait(s, f, "--timeout", "60")
    spans = [(r["started_at"], r["finished_at"]) for r in result["extractors"]]
    assert len(spans) == 4
    latest_start = max(a for a, _ in spans)
    earliest_end = min(b for _, b in spans)
    assert latest_start < earliest_end, f"extractors ran one after another: {spans}"


def test_sigkilled_worker_child_is_redelivered_without_duplicates(stack_settings, tmp_path):
    s = stack_settings.model_copy(update={"llm_simulated_latency_s": 3.0})
    f = write_session(tmp_path / "s.json", session(commit_id="cel-kill"))
    with workers(s, tmp_path, [("commit,extract,maintenance", 4)]) as (w,):
        proc = ctxpipe(s, "commit", str(f), "--json")
        assert proc.returncode == 0, proc.stderr
        # find the pool process running the archive phase and kill it hard
        deadline = time.monotonic() + 20
        victim = None
        while victim is None and time.monotonic() < deadline:
            out = celery(s, "inspect", "active", "-d", w.name, "-j", "-t", "2")
            try:
                active = json.loads(out.stdout.strip().splitlines()[-1]).get(w.name, [])
            except (json.JSONDecodeError, IndexError):
                active = []
            for t in active:
                if t["name"] == "ctxpipe.commit.archive":
                    victim = t["worker_pid"]
            time.sleep(0.2)
        assert victim, f"archive task never seen running: {w.text()[-2000:]}"
        os.kill(victim, signal.SIGKILL)
        row = wait_commit(s, "cel-kill", timeout=90)
    assert row["phase"] == "registered", row
    assert "WorkerLostError" in w.text() or "SIGKILL" in w.text()
    # exactly one archive, no duplicate nodes, events unique by construction
    archives = list((s.fs_root / "acme" / "sessions" / "s1" / "archives").iterdir())
    assert [a.name for a in archives if not a.name.startswith(".")] == ["1"]
    ids = outbox_ids(s)
    assert len(ids) == len(set(ids)) == row["result"]["stats"]["outbox_events_queued"]


def test_redelivering_any_phase_by_hand_changes_nothing(stack_settings, tmp_path):
    f = write_session(tmp_path / "s.json", session(commit_id="cel-again"))
    with workers(stack_settings, tmp_path, [("commit,extract,maintenance", 4)]):
        commit_wait(stack_settings, f)
        before_fs = snapshot(stack_settings.fs_root)
        before_events = sorted(outbox_ids(stack_settings))
        before_row = ledger_row(stack_settings, "cel-again")
        names = [
            "archive",
            "extract_profile",
            "extract_preferences",
            "extract_entity_event",
            "extract_procedure",
            "write",
            "register",
            "prepare",
            "finish",
            "run",
        ]
        for name in names:
            call_task(stack_settings, f"ctxpipe.commit.{name}", ["cel-again"])
        call_task(stack_settings, "ctxpipe.commit.plan", [[], "cel-again"])
        time.sleep(3)  # let the workers run them
    assert snapshot(stack_settings.fs_root) == before_fs
    assert sorted(outbox_ids(stack_settings)) == before_events
    assert ledger_row(stack_settings, "cel-again") == before_row


def test_two_concurrent_commits_for_one_user_both_land(stack_settings, tmp_path):
    a = write_session(tmp_path / "a.json", session(session_id="sa", commit_id="cel-a"))
    b_msgs = [
        {"id": "b1", "role": "user", "content": "By the way, I have a dog named Pixel."},
        {"id": "b2", "role": "assistant", "content": "Lovely name!"},
        {"id": "b3", "role": "user", "content": "I work as a staff engineer at Initech now."},
    ]
    b = write_session(
        tmp_path / "b.json", session(session_id="sb", commit_id="cel-b", messages=b_msgs)
    )
    with workers(
        stack_settings,
        tmp_path,
        [("commit,extract,maintenance", 2), ("commit,extract,maintenance", 2)],
    ):
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "ctxpipe", "commit", str(p), "--wait", "--json"],
                cwd=ROOT,
                env=settings_env(stack_settings),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for p in (a, b)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    profile = (stack_settings.fs_root / "acme/users/alice/memories/profile/content.md").read_text()
    assert "lisbon" in profile.lower()
    assert "staff engineer" in profile.lower()


def test_producer_without_ctxpipe_enqueues_by_name(stack_settings, tmp_path):
    script = tmp_path / "producer.py"
    script.write_text(
        textwrap.dedent(f"""
        import json, sys
        from celery import Celery
        app = Celery(broker={stack_settings.redis_url!r}, backend={stack_settings.redis_url!r})
        session = json.loads(sys.argv[1])
        res = app.send_task("ctxpipe.commit.submit", args=[session], queue="commit")
        out = res.get(timeout=60)
        assert not any(m.startswith(("ctxpipe", "tasks")) for m in sys.modules), "imported"
        print(json.dumps(out))
    """)
    )
    with workers(stack_settings, tmp_path, [("commit,extract,maintenance", 4)]):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPIPE_")}
        proc = subprocess.run(
            [sys.executable, str(script), json.dumps(session(commit_id="cel-prod"))],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["commit_id"] == "cel-prod"
        row = wait_commit(stack_settings, "cel-prod")
    assert row["phase"] == "registered" and row["status"] == "success"


def test_sweeper_redrives_a_commit_whose_workflow_was_lost(stack_settings, tmp_path):
    """A commit recorded in the ledger whose messages never reached a worker (lost broker
    state) is found by the beat sweeper and driven to completion."""
    from ctxpipe.commit import steps
    from ctxpipe.commit.payloads import CommitRequest
    from ctxpipe.core.session import SessionInput
    from ctxpipe.storage.commit_ledger import CommitLedger
    from ctxpipe.storage.db import Database

    db = Database(stack_settings.database_url)
    req = CommitRequest.from_session(SessionInput.model_validate(session(commit_id="cel-lost")))
    assert steps.submit(CommitLedger(db), req)  # recorded, but no workflow was started
    with psycopg.connect(stack_settings.database_url, autocommit=True) as conn:
        conn.execute("UPDATE ctx.commits SET updated_at = now() - interval '1 hour'")
    with workers(stack_settings, tmp_path, [("commit,extract,maintenance", 4)]):
        call_task(stack_settings, "ctxpipe.maintenance.sweep_stuck_commits", [])
        row = wait_commit(stack_settings, "cel-lost", timeout=60)
    db.close()
    assert row["phase"] == "registered"


def test_another_users_commit_into_a_session_fails_on_the_workers_writing_nothing(
    stack_settings, tmp_path
):
    """Session ownership on the Celery path: the archive task refuses the intruder's commit,
    the ledger says why, and the FS and the outbox stay as the owner left them."""
    mine = write_session(tmp_path / "mine.json", session(commit_id="own-1"))
    theirs = write_session(
        tmp_path / "theirs.json", session(commit_id="intruder-1", user_id="mallory")
    )
    with workers(stack_settings, tmp_path, [("commit,extract,maintenance", 2)]):
        assert commit_wait(stack_settings, mine)["status"] == "success"
        before = snapshot(stack_settings.fs_root)
        events = sorted(outbox_ids(stack_settings))
        proc = ctxpipe(stack_settings, "commit", str(theirs), "--wait", "--json")
    assert proc.returncode == 2, proc.stdout
    assert "belongs to another user" in proc.stderr and "phase archive" in proc.stderr
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1, proc.stderr
    row = ledger_row(stack_settings, "intruder-1")
    assert row is not None and row["phase"] == "failed"
    assert "belongs to another user" in row["error"]
    assert snapshot(stack_settings.fs_root) == before
    assert sorted(outbox_ids(stack_settings)) == events
