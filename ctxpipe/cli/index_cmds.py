"""Index replica commands: `outbox list|requeue`, `repair`, `reindex`, `status`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxpipe.cli.app import app, console, emit_json, fail, handle_errors, settings
from ctxpipe.core.enums import OutboxStatus
from ctxpipe.runtime import Runtime

outbox_app = typer.Typer(
    help="The outbox that feeds the index replica: list events, requeue dead ones.",
    no_args_is_help=True,
)
app.add_typer(outbox_app, name="outbox")

JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]


def _runtime() -> Runtime:
    return Runtime(settings())


def _age(ts: datetime | None) -> str:
    if ts is None:
        return ""
    from ctxpipe.core.models import utcnow

    secs = max((utcnow() - ts).total_seconds(), 0.0)
    if secs < 120:
        return f"{secs:.0f}s"
    if secs < 7200:
        return f"{secs / 60:.0f}m"
    return f"{secs / 3600:.1f}h"


@outbox_app.command("list")
@handle_errors
def outbox_list_cmd(
    dead: Annotated[bool, typer.Option("--dead", help="only dead events")] = False,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", "-s", help="only these statuses (repeatable)"),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1)] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Outbox events, oldest first (default: every status but done).

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    from ctxpipe.index.wiring import make_outbox

    if dead:
        wanted = [OutboxStatus.DEAD.value]
    elif status:
        wanted = [OutboxStatus(s).value for s in status]
    else:
        wanted = [s.value for s in OutboxStatus if s is not OutboxStatus.DONE]
    rt = _runtime()
    try:
        events = make_outbox(rt).list_events(wanted, limit=limit)
    finally:
        rt.close()
    if as_json:
        emit_json([e.model_dump(mode="json") for e in events])
        return
    if not events:
        console.print(f"no {'/'.join(wanted)} events")
        return
    table = Table("event id", "type", "uri", "status", "tries", "age", "error")
    for e in events:
        table.add_row(
            e.event_id,
            e.event_type.value,
            e.uri,
            e.status.value,
            f"{e.retry_count}/{e.max_retries}",
            _age(e.created_at),
            (e.error_message or "")[:80],
        )
    console.print(table)


@outbox_app.command("requeue")
@handle_errors
def outbox_requeue_cmd(
    event_ids: Annotated[list[str] | None, typer.Argument(help="dead event ids")] = None,
    all_dead: Annotated[bool, typer.Option("--all-dead", help="every dead event")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Put dead events back to pending with a fresh retry budget."""
    from ctxpipe.index.wiring import make_outbox

    if not event_ids and not all_dead:
        fail("give event ids or --all-dead")
    rt = _runtime()
    try:
        requeued = make_outbox(rt).requeue(event_ids or [], all_dead=all_dead)
    finally:
        rt.close()
    missing = sorted(set(event_ids or []) - set(requeued))
    if as_json:
        emit_json({"requeued": requeued, "not_dead": missing})
    else:
        console.print(f"requeued {len(requeued)} event(s)", highlight=False)
        for eid in missing:
            console.print(f"  [yellow]not dead (or unknown):[/] {eid}", highlight=False)
    if missing and not requeued:
        raise typer.Exit(1)


@app.command("repair")
@handle_errors
def repair_cmd(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="report only, queue nothing")] = False,
    full: Annotated[
        bool, typer.Option("--full", help="compare every node, not only recent changes")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Compare the FS with the index replica; queue events for missing/stale/orphaned rows."""
    from ctxpipe.index.wiring import make_repair

    rt = _runtime()
    try:
        report = make_repair(rt).run(full=full, dry_run=dry_run)
    finally:
        rt.close()
    if as_json:
        emit_json(report)
        return
    console.print(
        f"repair ({report.mode}{', dry run' if dry_run else ''}): {report.fs_nodes} FS nodes, "
        f"{report.replica_nodes} replica rows, {report.compared} compared in "
        f"{report.duration_ms} ms",
        highlight=False,
    )
    table = Table("divergence", "count", "examples")
    for kind in ("missing", "stale", "orphaned", "relations"):
        uris = report.uris.get(kind, [])
        table.add_row(kind, str(getattr(report, kind)), ", ".join(uris[:3]))
    console.print(table)
    if report.in_flight:
        console.print(f"{report.in_flight} divergent URI(s) already have an event in flight")
    if report.unreadable:
        console.print(f"[yellow]{report.unreadable} node(s) could not be read[/]")
    if not dry_run:
        console.print(
            f"queued {report.events_queued} event(s); the embed workers index them "
            "(`ctxpipe status` shows the backlog)",
            highlight=False,
        )


@app.command("reindex")
@handle_errors
def reindex_cmd(
    clean: Annotated[bool, typer.Option("--clean", help="empty the replica tables first")] = False,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 64,
    as_json: JsonOpt = False,
) -> None:
    """Rebuild the index replica from the FS (in this process; loads the embedding model)."""
    from ctxpipe.index.reindex import reindex
    from ctxpipe.index.wiring import make_indexer

    rt = _runtime()
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        indexer = make_indexer(rt)
        with Progress(*columns, console=console, disable=as_json) as progress:
            bar = progress.add_task("reindexing nodes", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total)

            report = reindex(indexer, clean=clean, batch_size=batch_size, progress=advance)
    finally:
        rt.close()
    if as_json:
        emit_json(report)
    else:
        console.print(
            f"reindexed {report.indexed} node(s) ({report.chunks} chunks, {report.relations} "
            f"edges), {report.deleted} stale row(s) removed, {report.duration_ms} ms",
            highlight=False,
        )
        for uri, err in list(report.errors.items())[:10]:
            console.print(f"  [red]failed[/] {uri}: {err}", highlight=False)
    if report.errors:
        raise typer.Exit(1)


def _backlog_row(st: Any) -> str:
    b = st.commit_backlog
    age = "-" if b.oldest_age_s is None else f"{b.oldest_age_s:.1f}s"
    cap = f"cap {b.max_pending}" if b.max_pending else "no cap"
    return (
        f"{b.in_flight} in flight ({cap}), oldest {age}, "
        f"{b.finished_recently} finished in the last {b.window_s:.0f}s"
    )


def _cost_row(st: Any) -> str:
    c = st.llm_cost
    if not c.commits:
        return "-"
    return (
        f"{c.llm_calls} calls, {c.prompt_tokens} prompt + {c.completion_tokens} completion "
        f"tokens over {c.commits} commits / {c.messages} messages "
        f"({c.calls_per_100_messages:.1f} calls and {c.prompt_tokens_per_100_messages:.0f} "
        "prompt tokens per 100 messages)"
    )


def _cost_by_phase_row(st: Any) -> str:
    c = st.llm_cost
    if not c.by_phase:
        return "-"
    return ", ".join(
        f"{phase} {u.calls} calls / {u.prompt_tokens}+{u.completion_tokens} tokens"
        for phase, u in sorted(c.by_phase.items())
    )


def _status_rows(st: Any) -> list[tuple[str, str]]:
    rows = [
        ("queues", ", ".join(f"{q} {n}" for q, n in st.queues.items()) or "-"),
        (
            "outbox",
            ", ".join(
                f"{k} {st.outbox.get(k, 0)}" for k in ("pending", "claimed", "failed", "dead")
            )
            + f" (done {st.outbox.get('done', 0)})",
        ),
        (
            "oldest pending",
            "-" if st.oldest_pending_age_s is None else f"{st.oldest_pending_age_s:.1f}s",
        ),
        (
            "nodes",
            f"{st.fs_nodes} on FS, {st.replica_nodes} in the replica "
            f"({st.replica_chunks} chunks, {st.replica_edges} edges)",
        ),
        ("commit backlog", _backlog_row(st)),
        ("LLM cost", _cost_row(st)),
        ("  by phase", _cost_by_phase_row(st)),
    ]
    last = st.last_repair
    if last:
        rows.append(
            (
                "last repair",
                f"{last['finished_at']:%Y-%m-%d %H:%M:%S} {last['mode']}: missing "
                f"{last['missing']}, stale {last['stale']}, orphaned {last['orphaned']}, "
                f"relations {last['relations']} ({last['events_queued']} events queued)",
            )
        )
    else:
        rows.append(("last repair", "never"))
    phases = ", ".join(f"{p} {n}" for p, n in sorted(st.commits_by_phase.items()))
    rows.append(("commits", phases or "none"))
    return rows


@app.command("status")
@handle_errors
def status_cmd(as_json: JsonOpt = False) -> None:
    """Queue depths, outbox backlog, FS vs replica, last repair, commits by phase.

    Exit status 1 when a server (Redis, PostgreSQL) could not be read."""
    from ctxpipe.index.status import collect_status
    from tasks.queues import QUEUES  # the CLI is the composition root

    cfg = settings()
    rt = Runtime(cfg)
    try:
        st = collect_status(cfg, db=rt.db, fs=rt.fs, queues=QUEUES)
    finally:
        rt.close()
    if as_json:
        data = st.model_dump(mode="json")
        data["in_sync"] = st.in_sync
        emit_json(data)
        if st.errors:
            raise typer.Exit(1)
        return
    table = Table(show_header=False, box=None)
    for key, value in _status_rows(st):
        table.add_row(f"[bold]{key}[/]", value)
    console.print(table)
    for part, err in st.errors.items():
        console.print(f"[red]{part} unavailable:[/] {err}", highlight=False)
    verdict = "[green]in sync[/]" if st.in_sync else "[yellow]catching up[/]"
    console.print(f"replica: {verdict}")
    if st.errors:
        raise typer.Exit(1)
