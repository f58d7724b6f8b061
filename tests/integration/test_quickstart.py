"""The Python blocks of docs/quickstart.md and of the README run as written against a real API
server (uvicorn in a thread over real PostgreSQL and Redis); the index is brought up to date
in between (docs) or by a thread that plays the embed workers while the block polls (README)."""

from __future__ import annotations

import contextlib
import io
import re
import threading
from pathlib import Path

import pytest
from api_world import ApiWorld

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
README = ROOT / "README.md"
SCHEMA = "rt_quickstart"  # the world of the module (conftest.py), served at `world_url`


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_quickstart_blocks_run(
    world: ApiWorld, world_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_block, find_block = python_blocks(QUICKSTART.read_text(encoding="utf-8"))
    monkeypatch.setenv("CTXPIPE_API_URL", world_url)
    monkeypatch.setenv("CTXPIPE_API_KEY", world.key("acme", "read,commit", user="alice"))
    scope: dict[str, object] = {"__name__": "quickstart"}

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(commit_block, "quickstart-commit", "exec"), scope)
    assert re.fullmatch(r"commit \S+ success\n", out.getvalue()), out.getvalue()

    world.reindex()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(find_block, "quickstart-find", "exec"), scope)
    printed = out.getvalue()
    assert "ctx://acme/users/alice/" in printed and "Lisbon" in printed, printed


def test_the_readme_block_runs(
    world: ApiWorld, world_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    [block] = python_blocks(README.read_text(encoding="utf-8"))
    monkeypatch.setenv("CTXPIPE_API_URL", world_url)
    monkeypatch.setenv("CTXPIPE_API_KEY", world.key("acme", "read,commit", user="bea"))
    done = threading.Event()

    def embed_worker() -> None:  # what the embed workers do on a deployed stack
        while not done.wait(0.5):
            world.reindex()

    worker = threading.Thread(target=embed_worker, daemon=True)
    worker.start()
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block, "readme", "exec"), {"__name__": "readme"})
    finally:
        done.set()
        worker.join(timeout=60)
    assert "ctx://acme/users/bea/" in out.getvalue() and "Lisbon" in out.getvalue(), out.getvalue()
