"""An unreachable database or broker fails a call within a few seconds, in one line, without
the password — for CLI commands and for service calls."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxpipe.cli import app
from ctxpipe.core.config import Settings
from ctxpipe.core.errors import StorageError
from ctxpipe.core.session import RequestContext
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService
from ctxpipe.storage.db import Database

DEAD_PG = "postgresql://ctxpipe:pg-secret-x@127.0.0.1:1/ctxpipe"
DEAD_REDIS = "redis://:redis-secret-x@127.0.0.1:1/0"
FEW_S = 6.0
CTX = RequestContext(account_id="acme", user_id="u1", session_id="s1")


def test_a_pool_on_an_unreachable_server_fails_at_once_naming_the_cause() -> None:
    db = Database(DEAD_PG, connect_timeout=5.0)
    started = time.monotonic()
    with pytest.raises(StorageError) as info, db.connection():
        pass
    assert time.monotonic() - started < FEW_S
    line = str(info.value)
    assert "\n" not in line and "pg-secret-x" not in line
    assert "cannot connect to PostgreSQL at ctxpipe@127.0.0.1:1/ctxpipe" in line
    assert "refused" in line
    db.close()


def test_service_reads_fail_within_seconds(tmp_path: Path) -> None:
    svc = ContextEngineService(
        Runtime(Settings(fs_root=tmp_path / "fs", database_url=DEAD_PG, redis_url=DEAD_REDIS))
    )
    try:
        for call in (
            lambda: svc.find("where does the user live?", CTX),
            lambda: svc.build_context("where does the user live?", CTX, budget=500),
        ):
            started = time.monotonic()
            with pytest.raises(StorageError, match="cannot connect to PostgreSQL"):
                call()
            assert time.monotonic() - started < FEW_S
    finally:
        svc.close()


@pytest.mark.parametrize(
    "args",
    [
        ["find", "where does the user live?", "-a", "acme", "-u", "u1"],
        ["search", "where does the user live?", "-a", "acme", "-u", "u1"],
        ["commits", "list"],
    ],
    ids=lambda a: a[0],
)
def test_cli_commands_fail_within_seconds_in_one_line(args: list[str], tmp_path: Path) -> None:
    env = {
        "CTXPIPE_DATABASE_URL": DEAD_PG,
        "CTXPIPE_REDIS_URL": DEAD_REDIS,
        "CTXPIPE_FS_ROOT": str(tmp_path / "fs"),
        "CTXPIPE_VAR_DIR": str(tmp_path / "var"),
    }
    started = time.monotonic()
    result = CliRunner().invoke(app, args, env=env)
    elapsed = time.monotonic() - started
    assert result.exit_code != 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "PostgreSQL" in lines[0], lines
    assert "pg-secret-x" not in result.output + result.stderr
    assert elapsed < FEW_S, elapsed
