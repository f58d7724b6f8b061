"""`ctxpipe demo`: commit the sample sessions through Celery, show the memory tree and outbox.

Run by `make demo` after `ctxpipe dev up`. Commit ids are derived from the file contents, so
running the demo again re-uses the earlier commits (idempotent) instead of duplicating them.
"""

from __future__ import annotations

import gc
import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxpipe.cli.app import app, console, fail, handle_errors, settings
from ctxpipe.cli.commit_cmds import load_session
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.devstack.env import project_root
from ctxpipe.service import CommitView

if TYPE_CHECKING:
    from ctxpipe.service import ContextEngineService

REQUIRED = ("postgres", "redis", "worker-commit", "worker-extract")


def example_files(given: list[Path] | None) -> list[Path]:
    if given:
        return given
    for base in (Path.cwd(), project_root()):
        if base is not None and sorted((base / "examples").glob("*.json")):
            return sorted((base / "examples").glob("*.json"))
    raise ValueError("no sample sessions: examples/*.json is empty (or pass FILE arguments)")


def demo_commit_id(path: Path) -> str:
    return "demo-" + hashlib.sha256(path.read_bytes()).hexdigest()[:24]


def check_stack(cfg: Settings) -> None:
    from ctxpipe.cli.dev_cmds import make_stack

    status = make_stack(cfg).status()
    down = [c.name for c in status.components if c.name in REQUIRED and not c.alive]
    if down:
        fail(f"the dev stack is not running ({', '.join(down)} down): run `ctxpipe dev up`")


def outbox_counts(cfg: Settings) -> list[tuple[str, str, int]]:
    import psycopg
    from psycopg import sql

    query = sql.SQL(
        "SELECT status, event_type, count(*) FROM {}.outbox_events "
        "GROUP BY status, event_type ORDER BY status, event_type"
    ).format(sql.Identifier(cfg.db_schema))
    with psycopg.connect(cfg.database_url, connect_timeout=10) as conn:
        return [(str(s), str(t), int(n)) for s, t, n in conn.execute(query).fetchall()]


def release_result_handles() -> None:
    """Unsubscribe the result handles Celery keeps for the enqueued chords while the
    interpreter is intact; left to exit, their `__del__` prints a traceback."""
    from tasks.app import app as celery_app

    backend = celery_app.backend
    for mapping in getattr(backend, "_pending_results", ()):
        for waiters in list(mapping.values()):
            for result in list(waiters.values()):
                backend.remove_pending_result(result)
    gc.collect()


def wait_all(
    service: ContextEngineService, ids: dict[str, Path], timeout: float
) -> dict[str, CommitView]:
    views: dict[str, CommitView] = {}
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    deadline = time.monotonic() + timeout
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("commits through Celery", total=len(ids))
        while len(views) < len(ids):
            for cid in ids:
                if cid in views:
                    continue
                view = service.get_commit(cid)
                if view.finished:
                    views[cid] = view
                    progress.advance(bar)
            if len(views) < len(ids):
                if time.monotonic() >= deadline:
                    left = ", ".join(ids[c].name for c in ids if c not in views)
                    raise TimeoutError(
                        f"commits not finished after {timeout:.0f}s: {left} "
                        "(see `ctxpipe dev logs worker-commit`)"
                    )
                time.sleep(0.2)
    return views


def results_table(ids: dict[str, Path], views: dict[str, CommitView]) -> Table:
    table = Table(title="commits", title_justify="left")
    for col in ("session file", "commit id", "status", "created", "merged", "skipped", "ms"):
        table.add_column(col, justify="right" if col in {"created", "merged", "ms"} else "left")
    for cid, path in ids.items():
        view = views[cid]
        r = view.result
        status = view.status or view.phase
        colour = {"success": "green", "partial": "yellow"}.get(status, "red")
        if r is None:
            table.add_row(path.name, cid, f"[{colour}]{status}[/]", "-", "-", view.error or "", "")
            continue
        s = r.stats
        table.add_row(
            path.name,
            cid,
            f"[{colour}]{status}[/]",
            str(s.nodes_created),
            str(s.nodes_merged),
            str(s.candidates_skipped),
            str(s.duration_ms),
        )
    return table


@app.command("demo")
@handle_errors
def demo_cmd(
    files: Annotated[
        list[Path] | None, typer.Argument(help="session JSON files (default: examples/*.json)")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1)] = 300.0,
    depth: Annotated[int, typer.Option("--depth", "-d", min=1)] = 3,
) -> None:
    """Commit sample sessions through the running dev stack, then show the memory tree."""
    from ctxpipe.cli.fs_cmds import tree_cmd
    from ctxpipe.runtime import Runtime
    from ctxpipe.service import ContextEngineService
    from tasks.dispatcher import CeleryDispatcher

    cfg = settings()
    paths = example_files(files)
    sessions = {p: load_session(p) for p in paths}  # validate every file before submitting
    check_stack(cfg)
    runtime = Runtime(cfg)
    service = ContextEngineService(runtime, CeleryDispatcher(cfg, db=runtime.db))
    try:
        ids: dict[str, Path] = {}
        for path, session in sessions.items():
            req = CommitRequest.from_session(session, commit_id=demo_commit_id(path))
            ids[service.dispatcher.submit(req)] = path
        console.print(f"submitted {len(ids)} session(s) to the commit queue", highlight=False)
        views = wait_all(service, ids, timeout)
    finally:
        release_result_handles()
        service.close()
    console.print(results_table(ids, views))

    owners = sorted({(s.account_id, s.user_id) for s in sessions.values()})
    for account, user in owners:
        console.rule(f"memory of {user} ({account})")
        tree_cmd(f"ctx://{account}/users/{user}/", depth=depth, as_json=False)

    counts = outbox_counts(cfg)
    table = Table(title="outbox events (index replica feed)", title_justify="left")
    for col in ("status", "event type", "count"):
        table.add_column(col, justify="right" if col == "count" else "left")
    for status, etype, n in counts:
        table.add_row(status, etype, str(n))
    table.add_row("[bold]total[/]", "", f"[bold]{sum(n for *_, n in counts)}[/]")
    console.print(table)

    console.print(
        f"\nThe stack keeps running. Flower: [bold]http://127.0.0.1:{cfg.flower_port}/[/] "
        f"(user [bold]{cfg.flower_user}[/], password from CTXPIPE_FLOWER_PASSWORD). "
        "Status: [bold]ctxpipe dev status[/]. Stop: [bold]ctxpipe dev down[/].",
        highlight=False,
    )
    failed = [path.name for cid, path in ids.items() if views[cid].result is None]
    if failed:
        fail(f"{len(failed)} commit(s) failed: {', '.join(failed)}")
