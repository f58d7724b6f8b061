"""Workers send the task events Flower shows by default; `CTXPIPE_WORKER_TASK_EVENTS=false`
turns them off (each event is a publish on the task's path), and the throwaway workers of the
tests and benchmarks follow the setting instead of forcing them on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.config import Settings
from ctxpipe.devstack import workers
from tasks.app import make_app


def test_workers_send_task_events_by_default() -> None:
    assert Settings().worker_task_events is True
    assert make_app(Settings()).conf.worker_send_task_events is True


def test_the_setting_turns_them_off_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPIPE_WORKER_TASK_EVENTS", "false")
    settings = Settings()
    assert settings.worker_task_events is False
    assert make_app(settings).conf.worker_send_task_events is False


def test_a_throwaway_worker_does_not_force_events_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started: list[list[str]] = []

    class Ready:
        returncode = None
        pid = 0

        def poll(self) -> None:
            return None

    def popen(cmd: list[str], **kw: Any) -> Ready:
        started.append(cmd)
        kw["stdout"].write(b"celery@localhost ready.\n")  # the worker's log file
        kw["stdout"].flush()
        return Ready()

    monkeypatch.setattr(workers.subprocess, "Popen", popen)
    workers.start_worker(Settings(worker_task_events=False), "commit", 1, tmp_path, timeout=5)
    [cmd] = started
    assert cmd[cmd.index("-A") + 1] == "tasks.app"
    assert "-E" not in cmd and "--events" not in cmd  # the app's setting decides
