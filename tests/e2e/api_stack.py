"""The API as deployed, for the end-to-end tests of the API and of the memory browser: a real
uvicorn process (`ctxpipe serve`) in front of real Celery workers (commit and maintenance,
extract, embed), PostgreSQL and Redis. The `api_stack` fixture (conftest.py) serves one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from celery_stack import ROOT, Worker, ctxpipe, settings_env, start_worker

from ctxpipe.core.config import Settings
from ctxpipe.storage.netutil import free_port


def make_key(settings: Settings, *args: str) -> str:
    """A new API key: `ctxpipe keys create ARGS --json`."""
    proc = ctxpipe(settings, "keys", "create", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["key"]  # type: ignore[no-any-return]


def secret_of(key: str) -> str:
    """The part of a key (`ctx_<id>_<secret>`) that must never be written to a log."""
    return key.split("_", 2)[2]


def wait_answering(
    url: str, proc: subprocess.Popen[bytes], log: Path, *, status: int | None = None
) -> None:
    """Wait until `url` answers (with `status`, when given) while `proc` runs; on failure its
    log says why."""
    deadline = time.monotonic() + 60
    while True:
        try:
            answer = httpx.get(url, timeout=2)
            if status is None or answer.status_code == status:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


@dataclass
class ApiStack:
    settings: Settings
    url: str
    log: Path  # the API process's output
    secrets: list[str] = field(default_factory=list)

    def key(self, *args: str) -> str:
        """A new API key (`ctxpipe keys create ARGS`), checked never to reach the API's log."""
        key = make_key(self.settings, *args)
        self.secrets.append(secret_of(key))
        return key


@contextmanager
def served(settings: Settings, logdir: Path) -> Iterator[ApiStack]:
    """Serve the API of `settings` with its workers until the block ends, then stop them and
    check the API's log: no traceback, no key's secret."""
    stack = ApiStack(settings, f"http://127.0.0.1:{free_port()}", logdir / "api.log")
    workers: list[Worker] = []
    with open(stack.log, "wb") as log:
        api = subprocess.Popen(
            [sys.executable, "-m", "ctxpipe", "serve", "--port", stack.url.rsplit(":", 1)[1]],
            cwd=ROOT,
            env=settings_env(settings),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            workers.append(start_worker(settings, "commit,maintenance", 2, logdir))
            workers.append(start_worker(settings, "extract", 2, logdir))
            workers.append(start_worker(settings, "embed", 1, logdir, pool="solo"))
            wait_answering(f"{stack.url}/readyz", api, stack.log, status=200)
            yield stack
        finally:
            for w in workers:
                w.stop()
            api.terminate()
            try:
                api.wait(timeout=20)
            except subprocess.TimeoutExpired:
                api.kill()
                api.wait(timeout=10)
    text = stack.log.read_text()
    assert "Traceback" not in text, text
    assert [s for s in stack.secrets if s in text] == []  # keys never reach the log


__all__ = ["ApiStack", "make_key", "secret_of", "served", "wait_answering"]
