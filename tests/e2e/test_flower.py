"""Every phase of a commit is a task Flower shows: a commit on default settings (the offline
`rules` LLM) through real worker processes, and Flower's HTTP API (`/api/tasks`), started as the
dev stack starts it (`ctxpipe.devstack.celery_procs.flower_spec`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

import httpx
import pytest
from celery_stack import ROOT, SAMPLE_SESSION, ctxpipe, settings_env, workers, write_session

from ctxpipe.core.config import Settings
from ctxpipe.devstack.celery_procs import flower_spec
from ctxpipe.storage.netutil import free_port

PHASES = {
    "ctxpipe.commit.archive",
    "ctxpipe.commit.extract_profile",
    "ctxpipe.commit.extract_preferences",
    "ctxpipe.commit.extract_entity_event",
    "ctxpipe.commit.extract_procedure",
    "ctxpipe.commit.plan",
    "ctxpipe.commit.write",
    "ctxpipe.commit.register",
}


@pytest.fixture
def flower_settings(make_settings, clean_db, clean_redis) -> Settings:  # type: ignore[no-untyped-def]
    s = make_settings(flower_port=free_port(), flower_user="ops", flower_password="e2e-flower")
    s.fs_root.mkdir(parents=True, exist_ok=True)
    s.var_dir.mkdir(parents=True, exist_ok=True)
    return s


def _api(settings: Settings, path: str) -> Any:
    auth = (settings.flower_user, settings.flower_password.get_secret_value())
    url = f"http://127.0.0.1:{settings.flower_port}{path}"
    return httpx.get(url, auth=auth, timeout=5).json()


def _start_flower(settings: Settings, log: Any) -> subprocess.Popen[bytes]:
    spec = flower_spec(settings)
    proc = subprocess.Popen(
        spec.argv,
        cwd=ROOT,
        env={**settings_env(settings), **spec.env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if _api(settings, "/api/workers?refresh=1"):  # it sees the workers' events
                return proc
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    proc.kill()
    raise AssertionError("Flower did not answer on /api/workers within 60 s")


def _commit_tasks(tasks: dict[str, Any], commit_id: str) -> dict[str, str]:
    """Name → state of the tasks of one commit's canvas: those that share the root of the one
    whose arguments name the commit (the chord body's are cut short in Flower)."""
    roots = {
        t.get("root_id")
        for t in tasks.values()
        if t.get("name") == "ctxpipe.commit.archive" and commit_id in str(t.get("args"))
    }
    return {
        str(t["name"]): str(t["state"])
        for t in tasks.values()
        if t.get("name") and (t.get("root_id") in roots or commit_id in str(t.get("args")))
    }


def test_flower_shows_every_phase_of_a_commit(flower_settings, tmp_path):  # type: ignore[no-untyped-def]
    s = flower_settings
    f = write_session(tmp_path / "s.json", {**SAMPLE_SESSION, "commit_id": "flower-1"})
    with (
        workers(s, tmp_path, [("commit,maintenance", 2), ("extract", 2)]),
        open(tmp_path / "flower.log", "wb") as log,
    ):
        flower = _start_flower(s, log)
        try:
            proc = ctxpipe(s, "commit", str(f), "--wait", "--json")
            assert proc.returncode == 0, proc.stderr + proc.stdout
            deadline = time.monotonic() + 30
            seen: dict[str, str] = {}
            while time.monotonic() < deadline:
                seen = _commit_tasks(_api(s, "/api/tasks"), "flower-1")
                if PHASES <= set(seen) and all(seen[p] == "SUCCESS" for p in PHASES):
                    break
                time.sleep(0.5)
            assert PHASES <= set(seen), f"Flower saw {seen}"
            assert all(seen[p] == "SUCCESS" for p in PHASES), seen
            assert "ctxpipe.commit.run" not in seen  # not the fused canvas
        finally:
            os.killpg(flower.pid, signal.SIGTERM)
            flower.wait(timeout=20)
