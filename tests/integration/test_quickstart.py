"""The Python blocks of docs/quickstart.md run as written, in order, against a real API server
(uvicorn in a thread over real PostgreSQL and Redis); between the commit and the find the index
is brought up to date, the embed workers' job on a deployed stack."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from api_world import ApiWorld, api_world, served

QUICKSTART = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def world(
    pg_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ApiWorld, str]]:
    root: Path = tmp_path_factory.mktemp("quickstart")
    with api_world(pg_url, redis_url, root, "rt_quickstart") as w, served(w) as url:
        yield w, url


def test_the_quickstart_blocks_run(
    world: tuple[ApiWorld, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    w, url = world
    commit_block, find_block = python_blocks(QUICKSTART.read_text(encoding="utf-8"))
    monkeypatch.setenv("CTXPIPE_API_URL", url)
    monkeypatch.setenv("CTXPIPE_API_KEY", w.key("acme", "read,commit", user="alice"))
    scope: dict[str, object] = {"__name__": "quickstart"}

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(commit_block, "quickstart-commit", "exec"), scope)
    assert re.fullmatch(r"commit \S+ success\n", out.getvalue()), out.getvalue()

    w.reindex()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(find_block, "quickstart-find", "exec"), scope)
    printed = out.getvalue()
    assert "ctx://acme/users/alice/" in printed and "Lisbon" in printed, printed
