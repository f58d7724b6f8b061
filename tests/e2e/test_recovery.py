"""Fast recovery on the dev stack of real processes: a commit caught by a whole worker node that
is SIGKILLed, or by a broker that restarts with nothing on disk, finishes within seconds — not
after the 4 h visibility timeout, nor after the 120 s stuck-commit sweeper.

The LLM is slowed to 2 s a call so a commit is still in its extract phase when the fault hits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from ctxpipe.commit.recovery import WorkerRegistry
from ctxpipe.core.config import CommitConfig, Settings
from ctxpipe.devstack import DevStack
from ctxpipe.devstack.env import child_env
from ctxpipe.devstack.procs import ProcRecord, family
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.db import Database
from ctxpipe.storage.netutil import free_port, tail

pytestmark = pytest.mark.e2e

RECOVERY_TARGET_S = 30.0


def session(user: str, sid: str) -> dict[str, Any]:
    return {
        "account_id": "acme",
        "user_id": user,
        "agent_id": "helper",
        "session_id": sid,
        "commit_id": f"c-{sid}",
        "messages": [
            {
                "id": "m1",
                "role": "user",
                "created_at": "2026-03-14T10:00:00Z",
                "content": f"I'm {user.title()}, a backend developer at Initech in Lisbon.",
            },
            {"id": "m2", "role": "assistant", "content": "Nice! What are you working on?"},
            {
                "id": "m3",
                "role": "user",
                "content": "I prefer Go for services and I always write table-driven tests.",
            },
            {"id": "m4", "role": "assistant", "content": "Good habits."},
        ],
    }


@pytest.fixture(scope="module")
def stack() -> Iterator[DevStack]:
    root = Path(tempfile.mkdtemp(prefix="ctxpipe-test-recovery-"))  # PostgreSQL must traverse it
    settings = Settings(
        var_dir=root / "var",
        fs_root=root / "var" / "fs",
        database_url=f"postgresql://ctxpipe@127.0.0.1:{free_port()}/ctxpipe",
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        flower_port=free_port(),
        api_port=free_port(),  # never the default 8080: another stack may hold it
        llm_simulated_latency_s=2.0,
        # each extractor makes its own 2 s call in its task: a node can be killed, or the
        # broker wiped, while the extractors run (one call a session would be over by then)
        commit=CommitConfig(extraction_calls="extractor"),
        worker_heartbeat_ttl_s=4.0,
        reap_interval_s=1.0,
    )
    dev = DevStack(settings)
    try:
        dev.up(timeout=90)
        yield dev
    finally:
        logs = dev.logs_dir
        for log in sorted(logs.glob("*.log")):
            print(f"----- {log.name}\n{tail(log, 12)}")
        dev.down(timeout=5)
        shutil.rmtree(root, ignore_errors=True)


def submit(dev: DevStack, sess: dict[str, Any]) -> str:
    path = dev.dev_dir / f"{sess['session_id']}.json"
    path.write_text(json.dumps(sess), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "ctxpipe", "commit", str(path), "--json"],
        env=child_env(dev.settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return str(sess["commit_id"])


def ledger(dev: DevStack) -> CommitLedger:
    return CommitLedger(Database.from_settings(dev.settings), schema=dev.settings.db_schema)


def wait_phase(led: CommitLedger, commit_id: str, phases: set[str], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = led.get(commit_id)
        if row is not None and row.phase in phases:
            return row
        time.sleep(0.1)
    row = led.get(commit_id)
    raise AssertionError(f"{commit_id} not in {phases} after {timeout}s: {row}")


def wait_running_on(dev: DevStack, node: str, commit_id: str, timeout: float = 30) -> None:
    """Until a live incarnation of `node` runs a task of the commit (a pool process started
    it)."""
    client = redis.Redis.from_url(dev.settings.redis_url)
    reg = WorkerRegistry(client)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for inc in reg.alive():
                held = {o.commit_id for o in reg.orphans(inc) if o.running}
                if inc.startswith(f"{node}@") and commit_id in held:
                    return
            time.sleep(0.05)
    finally:
        client.close()
    raise AssertionError(f"no {node} worker ran a task of {commit_id} in {timeout}s")


def kill_node(dev: DevStack, name: str) -> list[int]:
    rec = ProcRecord.load(dev.run_dir, name)
    assert rec is not None and rec.alive(), f"{name} is not running"
    pids = family(rec.pid)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


def test_a_commit_caught_by_a_killed_worker_node_finishes_within_seconds(
    stack: DevStack,
) -> None:
    led = ledger(stack)
    cid = submit(stack, session("nora", "s-kill"))
    wait_phase(led, cid, {"archived"}, 60)  # the four extractors run now (2 s per LLM call)
    wait_running_on(stack, "extract", cid)
    killed = kill_node(stack, "worker-extract")  # parent and pool children: nothing acks
    t_kill = time.monotonic()
    row = wait_phase(led, cid, {"registered", "failed"}, 60)
    recovered = time.monotonic() - t_kill
    print(f"killed {killed}; commit registered {recovered:.1f}s later")
    assert row.phase == "registered" and row.status == "success", row
    assert recovered <= RECOVERY_TARGET_S
    assert int(row.attempts.get("reap", 0)) >= 1, "re-driven by the reaper"
    # the node died while running its task: counted towards failing a commit that kills its
    # worker (once: far from the bound)
    assert int(row.attempts.get("died-running", 0)) == 1, row.attempts
    # exactly-once effects: one archive, every node written once (version 1)
    result = row.result or {}
    assert [w["node_version"] for w in result["write_results"]] == [1] * len(
        result["write_results"]
    )
    archives = stack.settings.fs_root / "acme" / "sessions" / "s-kill" / "archives"
    assert len([p for p in archives.iterdir() if p.is_dir()]) == 1
    # the supervisor brought the node back
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and stack.record("worker-extract") is None:
        time.sleep(0.5)
    assert stack.record("worker-extract") is not None


def test_a_commit_in_flight_when_the_broker_loses_everything_is_redriven(
    stack: DevStack,
) -> None:
    led = ledger(stack)
    cid = submit(stack, session("omar", "s-wipe"))
    wait_phase(led, cid, {"archived"}, 60)
    # the broker restarts with nothing on disk: every queued and unacked message is gone
    stack.redis.stop()
    for f in stack.redis.state_dir.glob("appendonly*"):
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink()
    stack.redis.start()
    t_wipe = time.monotonic()
    row = wait_phase(led, cid, {"registered", "failed"}, 90)
    recovered = time.monotonic() - t_wipe
    print(f"broker wiped; commit registered {recovered:.1f}s later")
    assert row.phase == "registered" and row.status == "success", row
    assert recovered <= RECOVERY_TARGET_S
    archives = stack.settings.fs_root / "acme" / "sessions" / "s-wipe" / "archives"
    assert len([p for p in archives.iterdir() if p.is_dir()]) == 1
    # and the stack keeps working: a new commit after the wipe goes through
    after = submit(stack, session("pia", "s-after"))
    assert wait_phase(led, after, {"registered", "failed"}, 90).status == "success"
