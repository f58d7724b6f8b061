"""`ctxpipe demo`: commit the sample sessions through Celery, show the memory tree and outbox.

Run by `make demo` after `ctxpipe dev up`. Commit ids are derived from the file contents, so
running the demo again re-uses the earlier commits (idempotent) instead of duplicating them.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, fail, handle_errors, settings
from ctxpipe.cli.commit_cmds import load_session
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.session import SessionInput

if TYPE_CHECKING:
    from ctxpipe.service import CommitView, ContextEngineService

REQUIRED = ("postgres", "redis", "worker-commit", "worker-extract")


def example_files(given: list[Path] | None) -> list[Path]:
    from ctxpipe.devstack.env import project_root  # the package loads the servers' code

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

    from ctxpipe.storage.queries import Queries

    query = Queries(cfg.db_schema)["outbox_counts_by_type"]
    with psycopg.connect(cfg.database_url, connect_timeout=10) as conn:
        return [(str(s), str(t), int(n)) for s, t, n in conn.execute(query).fetchall()]


IN_FLIGHT = {"pending", "claimed", "failed"}  # failed = will be retried


def wait_for_index(cfg: Settings, timeout: float, stall_s: float = 15.0) -> None:
    """Show the embed workers draining the outbox (beat triggers the drain) until nothing is
    in flight, `timeout` passes, or nothing moved for `stall_s` (no embed tasks deployed)."""
    counts = outbox_counts(cfg)
    total = sum(n for *_, n in counts)
    if not total:
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn())
    deadline = time.monotonic() + timeout
    last, last_change = -1, time.monotonic()
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("indexing (outbox → pgvector)", total=total)
        while True:
            counts = outbox_counts(cfg)
            total = sum(n for *_, n in counts)
            busy = sum(n for st, _, n in counts if st in IN_FLIGHT)
            progress.update(bar, total=total, completed=total - busy)
            now = time.monotonic()
            if busy != last:
                last, last_change = busy, now
            if not busy or now >= deadline or now - last_change >= stall_s:
                return
            time.sleep(0.5)


def run_commits(
    service: ContextEngineService, sessions: dict[Path, SessionInput], timeout: float
) -> tuple[dict[str, Path], dict[str, CommitView]]:
    """Submit through the dispatcher and wait with a progress bar. Different users' sessions
    run in parallel; one user's sessions run one after the other, in file-name order, so
    their memories evolve in the order the conversations happened."""
    queues: dict[tuple[str, str], list[Path]] = {}
    for path in sessions:
        queues.setdefault((sessions[path].account_id, sessions[path].user_id), []).append(path)
    ids: dict[str, Path] = {}
    running: dict[str, tuple[str, str]] = {}
    views: dict[str, CommitView] = {}

    def submit_next(owner: tuple[str, str]) -> None:
        if queues[owner]:
            path = queues[owner].pop(0)
            req = CommitRequest.from_session(sessions[path], commit_id=demo_commit_id(path))
            cid = service.dispatcher.submit(req)
            ids[cid], running[cid] = path, owner

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    deadline = time.monotonic() + timeout
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("commits through Celery", total=len(sessions))
        for owner in queues:
            submit_next(owner)
        while running:
            for cid, owner in list(running.items()):
                view = service.get_commit(cid)
                if view.finished:
                    views[cid] = view
                    del running[cid]
                    progress.advance(bar)
                    submit_next(owner)
            if running:
                if time.monotonic() >= deadline:
                    left = ", ".join(ids[c].name for c in running)
                    raise TimeoutError(
                        f"commits not finished after {timeout:.0f}s: {left} "
                        "(see `ctxpipe dev logs worker-commit`)"
                    )
                time.sleep(0.2)
    return ids, views


def results_table(ids: dict[str, Path], views: dict[str, CommitView]) -> Table:
    table = Table(title="commits (details: ctxpipe commits show ID)", title_justify="left")
    table.add_column("session file / commit id", no_wrap=True)
    table.add_column("status")
    for col in ("created", "merged", "skipped", "ms"):
        table.add_column(col, justify="right")
    for cid, path in sorted(ids.items(), key=lambda item: str(item[1])):
        view = views[cid]
        status = view.status or view.phase
        colour = {"success": "green", "partial": "yellow"}.get(status, "red")
        cells = [f"{path.name}\n[dim]{cid}[/]", f"[{colour}]{status}[/]"]
        if view.result is None:
            table.add_row(*cells, "-", "-", "-", "-")
            continue
        s = view.result.stats
        numbers = (s.nodes_created, s.nodes_merged, s.candidates_skipped, s.duration_ms)
        table.add_row(*cells, *(str(n) for n in numbers))
    return table


@app.command("demo")
@handle_errors
def demo_cmd(
    files: Annotated[
        list[Path] | None, typer.Argument(help="session JSON files (default: examples/*.json)")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1)] = 300.0,
    depth: Annotated[int, typer.Option("--depth", "-d", min=1)] = 3,
    index_wait: Annotated[
        float, typer.Option("--index-wait", min=0, help="max seconds to watch the indexing")
    ] = 60.0,
) -> None:
    """Commit sample sessions through the running dev stack, then show the memory tree."""
    from ctxpipe.cli.fs_cmds import tree_cmd

    cfg = settings()
    paths = example_files(files)
    sessions = {p: load_session(p) for p in paths}  # validate every file before submitting
    check_stack(cfg)
    with services.service(cfg, commits="celery") as service:
        console.print(f"committing {len(sessions)} session(s) through Celery", highlight=False)
        ids, views = run_commits(service, sessions, timeout)
    console.print(results_table(ids, views))

    for cid, path in ids.items():
        if views[cid].result is None:
            err = views[cid].error or "no result"
            console.print(f"[red]{path.name}[/]: failed in {views[cid].error_phase}: {err}")

    owners = sorted({(s.account_id, s.user_id) for s in sessions.values()})
    for account, user in owners:
        console.rule(f"memory of {user} ({account})")
        try:
            tree_cmd(f"ctx://{account}/users/{user}/", depth=depth, as_json=False)
        except typer.Exit:
            pass  # nothing stored for this user (the error line was printed)

    if index_wait > 0:
        wait_for_index(cfg, index_wait)
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
