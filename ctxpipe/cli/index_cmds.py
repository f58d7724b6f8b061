"""Index replica commands: `outbox list|requeue`, `repair`, `reindex` (`status`: `status_cmds`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, fail, handle_errors
from ctxpipe.core.enums import OutboxStatus

outbox_app = typer.Typer(
    help="The outbox that feeds the index replica: list events, requeue dead ones.",
    no_args_is_help=True,
)
app.add_typer(outbox_app, name="outbox")

JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON instead of text")]


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
    with services.runtime() as rt:
        events = make_outbox(rt).list_events(wanted, limit=limit)
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
    with services.runtime() as rt:
        requeued = make_outbox(rt).requeue(event_ids or [], all_dead=all_dead)
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

    with services.runtime() as rt:
        report = make_repair(rt).run(full=full, dry_run=dry_run)
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

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with services.runtime() as rt:
        indexer = make_indexer(rt)
        with Progress(*columns, console=console, disable=as_json) as progress:
            bar = progress.add_task("reindexing nodes", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total)

            report = reindex(indexer, clean=clean, batch_size=batch_size, progress=advance)
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
