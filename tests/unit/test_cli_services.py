"""The CLI builds what its commands work on in one place (`ctxpipe.cli.services`), `status`
lives in its own module, and the queue names are defined once (`ctxpipe.core.queues`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctxpipe.cli import app, services
from ctxpipe.core import queues
from ctxpipe.core.config import Settings
from ctxpipe.service import InlineDispatcher

CLI = Path(services.__file__).parent
DEAD_PG = "postgresql://ctxpipe:pw@127.0.0.1:1/ctxpipe"
BUILT_HERE_ONLY = {"Runtime", "ContextEngineService", "CeleryDispatcher", "Database", "ContextFS"}


def _settings(tmp_path: Path) -> Settings:
    return Settings(fs_root=tmp_path / "fs", database_url=DEAD_PG, db_connect_timeout_s=1.0)


def test_no_command_module_builds_the_service_or_its_stores_itself() -> None:
    offenders = []
    for path in sorted(CLI.glob("*.py")):
        if path.name == "services.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr == "from_settings":
                fn = fn.value  # Database.from_settings(...), ContextFS.from_settings(...)
            if isinstance(fn, ast.Name) and fn.id in BUILT_HERE_ONLY:
                offenders.append(f"{path.name}:{node.lineno}: {fn.id}")
    assert offenders == []


def test_the_service_commits_in_process_or_through_celery(tmp_path: Path) -> None:
    from tasks.dispatcher import CeleryDispatcher

    cfg = _settings(tmp_path)
    with services.service(cfg) as inline:
        assert isinstance(inline.dispatcher, InlineDispatcher)
        assert inline.runtime.settings is cfg and inline.runtime.use_database
    with services.service(cfg, commits="celery") as queued:
        assert isinstance(queued.dispatcher, CeleryDispatcher)
        assert queued.runtime.settings is cfg


def test_an_optional_database_that_cannot_be_reached_is_left_out(tmp_path: Path) -> None:
    with services.runtime(_settings(tmp_path), optional_database=True) as rt:
        assert rt.use_database is False
    with services.runtime(_settings(tmp_path)) as rt:
        assert rt.use_database is True  # not probed: the first use fails in one line instead


def test_the_settings_come_from_the_environment_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPIPE_FS_ROOT", str(tmp_path / "env-fs"))
    assert services.open_fs().fs_root == (tmp_path / "env-fs").resolve()
    with services.runtime() as rt:
        assert rt.settings.fs_root == tmp_path / "env-fs"


def test_status_is_its_own_module() -> None:
    import typer.main

    commands = {
        c.name: c.callback.__module__
        for c in typer.main.get_group(app).commands.values()
        if c.callback is not None
    }
    assert commands["status"] == "ctxpipe.cli.status_cmds"


def test_queue_names_are_defined_once() -> None:
    import inspect

    from ctxpipe.index.status import collect_status
    from tasks import queues as routed

    assert routed.QUEUES is queues.QUEUES
    assert {q.name for q in routed.TASK_QUEUES} == set(queues.QUEUES)
    assert {r["queue"] for r in routed.TASK_ROUTES.values()} == set(queues.QUEUES)
    assert inspect.signature(collect_status).parameters["queues"].default is queues.QUEUES


def test_the_command_starts_without_the_pipeline_the_database_or_the_model_code() -> None:
    """`ctxpipe --help` and the commands that need no service do not pay for loading the
    commit pipeline, the read path, psycopg or numpy: a command imports what it opens."""
    import subprocess
    import sys

    heavy = ("ctxpipe.service", "ctxpipe.runtime", "ctxpipe.retrieval", "psycopg", "numpy")
    code = f"import sys, ctxpipe.cli; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


def test_a_database_error_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg
    from typer.testing import CliRunner

    def missing_table(*_a: object, **_k: object) -> object:
        raise psycopg.errors.UndefinedTable('relation "ctx.commit_ledger" does not exist')

    monkeypatch.setattr(services, "database", missing_table)
    result = CliRunner().invoke(app, ["commits", "list"])
    assert result.exit_code == 2
    assert "database error: relation" in result.output
    assert "(run `ctxpipe db migrate`)" in result.output
    assert "Traceback" not in result.output
