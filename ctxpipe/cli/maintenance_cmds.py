"""Maintenance commands: forget (TTL, capacity and value policies)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, fail, handle_errors


@app.command("forget")
@handle_errors
def forget_cmd(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list what would go and why; change nothing")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Forget memories picked by the configured policies (CTXPIPE_FORGETTING__*: TTL per
    category, capacity per owner and category, minimum value). Nothing is configured by
    default, so nothing goes."""
    from ctxpipe.maintenance.wiring import make_forgetter

    with services.runtime(optional_database=True) as rt:
        forgetter = make_forgetter(rt)
        doomed = forgetter.plan()
        if not dry_run and doomed and not yes:
            if not sys.stdin.isatty():
                fail(f"{len(doomed)} memories would be forgotten: pass --yes (or --dry-run)")
            typer.confirm(f"forget {len(doomed)} memories?", abort=True)
        result: dict[str, Any] = (
            {"dry_run": True, "forgotten": [d.model_dump() for d in doomed]}
            if dry_run
            else forgetter.run()
        )
    if as_json:
        emit_json(result)
        return
    table = Table("policy", "memory", "value", "why", header_style="bold", pad_edge=False)
    for d in result["forgotten"]:
        table.add_row(d["policy"], d["uri"], f"{d['value']:.3f}", d["reason"])
    verb = "would forget" if dry_run else "forgot"
    console.print(table if result["forgotten"] else "[dim]nothing to forget[/]")
    console.print(f"{verb} {len(result['forgotten'])} memories")
    if result.get("warning"):
        console.print(f"[yellow]warning:[/] {result['warning']}")


users_app = typer.Typer(help="Users of an account.", no_args_is_help=True)
app.add_typer(users_app, name="users")


@users_app.command("delete")
@handle_errors
def users_delete(
    account: Annotated[str, typer.Argument(help="account id")],
    user: Annotated[str, typer.Argument(help="user id")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="count what would go")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Erase a user: their memories, their sessions and archives, what agents derived only
    from them (and their lines in shared agent memories), edges, replica rows, ledger rows,
    recall statistics and snapshots. Idempotent; safe while their commits are in flight."""
    from ctxpipe.core.session import RequestContext
    from ctxpipe.maintenance.wiring import make_eraser

    RequestContext(account_id=account, user_id=user, session_id="erase")  # validates both ids
    if not dry_run and not yes:
        if not sys.stdin.isatty():
            fail(f"erasing user {user!r} of {account!r} cannot be undone: pass --yes")
        typer.confirm(
            f"erase user {user!r} of account {account!r}? This cannot be undone", abort=True
        )
    with services.runtime(optional_database=True) as rt:
        report = make_eraser(rt).erase(account, user, dry_run=dry_run)
    if as_json:
        emit_json(report)
        return
    verb = "would erase" if dry_run else "erased"
    console.print(
        f"{verb}: {report.user_nodes} memory nodes, {report.sessions} sessions, "
        f"{report.agent_nodes_removed} agent nodes removed and {report.agent_nodes_rewritten} "
        f"rewritten, {report.edges_removed} edges"
    )
    if report.rows:
        console.print("  rows: " + ", ".join(f"{k} {v}" for k, v in report.rows.items()))
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {w}")
