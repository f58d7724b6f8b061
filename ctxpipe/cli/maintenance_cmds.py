"""Maintenance commands: forget (TTL, capacity and value policies of seed 002)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table

from ctxpipe.cli.app import app, console, emit_json, fail, handle_errors, settings
from ctxpipe.runtime import Runtime


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

    rt = Runtime(settings())
    rt.use_database = rt.database_reachable()
    try:
        forgetter = make_forgetter(rt)
        doomed = forgetter.plan()
        if not dry_run and doomed and not yes:
            if not sys.stdin.isatty():
                fail(f"{len(doomed)} memories would be forgotten: pass --yes (or --dry-run)")
            typer.confirm(f"forget {len(doomed)} memories?", abort=True)
        result = (
            {"dry_run": True, "forgotten": [d.model_dump() for d in doomed]}
            if dry_run
            else forgetter.run()
        )
    finally:
        rt.close()
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
