"""`export` and `import`: a deployment's nodes as JSONL, and back; mem0 memories in.

Admin commands (no tenancy): an export names what it covers (--all, --account, and --user or
--agent of that account). The work is `ctxpipe.portability`'s; progress goes to stderr, so
the export itself can go to stdout."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ctxpipe.cli import services
from ctxpipe.cli.app import app, emit_json, err_console, fail, handle_errors
from ctxpipe.portability import (
    ImportFileError,
    Selection,
    last_uri,
    mem0_parser,
    parse_numbered,
    read_lines,
    write_export,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="print the report as JSON on stdout")]


class Format(StrEnum):
    CTXPIPE = "ctxpipe"
    MEM0 = "mem0"


def _progress(quiet: bool) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        TextColumn("{task.completed} records"),
        TextColumn("[dim]{task.fields[uri]}"),
        TimeElapsedColumn(),
        console=err_console,
        disable=quiet,
        transient=True,
    )


@app.command("export")
@handle_errors
def export_cmd(
    everything: Annotated[bool, typer.Option("--all", help="every account")] = False,
    account: Annotated[str | None, typer.Option("--account", "-a", help="one account")] = None,
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="only this user of --account")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="only this agent of --account")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write to this file [default: stdout]")
    ] = None,
    after: Annotated[
        str | None, typer.Option("--after", help="start after the record of this URI (a resume)")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="append to --out after its last complete record")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr")] = False,
) -> None:
    """Export nodes as JSONL (levels, metadata, relations, history; one record a line, in a
    stable order), streamed. Interrupted, it says on stderr where to resume (--after URI, or
    --resume with --out).

    Admin read (no tenancy): it sees every account and takes no --account/--user."""
    if everything == (account is not None):
        fail("name what to export: --all, or --account (with --user or --agent for one owner)")
    selection = Selection(account=account, user=user, agent=agent)
    if resume:
        if out is None or after is not None:
            raise typer.BadParameter("--resume reads its cursor from --out (takes no --after)")
        after = last_uri(out) if out.exists() else None
    fs = services.open_fs()
    stream: IO[str] = sys.stdout if out is None else open(out, "a" if resume else "w")  # noqa: SIM115
    cursor = after
    try:
        with _progress(quiet) as progress:
            task = progress.add_task("exporting", total=None, uri="")

            def advance(done: int, uri: str) -> None:
                nonlocal cursor
                cursor = uri
                progress.update(task, completed=done, uri=uri)

            report = write_export(fs, selection, stream, after=after, progress=advance)
    except BaseException:
        if cursor is not None:
            how = "--resume" if out is not None else f"--after '{cursor}'"
            err_console.print(f"export stopped after {cursor}: resume with {how}", highlight=False)
        raise
    finally:
        if out is not None:
            stream.close()
    err_console.print(
        f"exported {report.nodes} node(s) and {report.sessions} session owner(s) of "
        f"{report.selection}" + (f"; last {report.last_uri}" if report.last_uri else ""),
        highlight=False,
    )


@app.command("import")
@handle_errors
def import_cmd(
    source: Annotated[Path, typer.Argument(help="a JSONL file (an export, or mem0 memories)")],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="what the file holds")] = (
        Format.CTXPIPE
    ),
    account: Annotated[
        str | None,
        typer.Option(
            "--account",
            "-a",
            help="only records of this account (mem0: the account to import into)",
        ),
    ] = None,
    category: Annotated[
        str | None,
        typer.Option("--category", help="mem0: the memories' category [default: entities]"),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="a node that differs takes the record's state")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import a JSONL file through the FS's write path; the index replica follows through
    the outbox. Every record is checked first: one bad line and nothing is written. Running
    it again changes nothing; a node that differs from its record is a conflict, left as it
    is (exit status 1) unless --replace."""
    if not source.is_file():
        fail(f"no such file: {source}")
    if fmt is Format.MEM0:
        if account is None:
            raise typer.BadParameter("a mem0 import needs the account to import into: --account")
        records = read_lines(str(source), mem0_parser(account, category))
    else:
        if category is not None:
            fail("--category is for --format mem0")
        records = read_lines(str(source), parse_numbered)
    from ctxpipe.portability.wiring import make_importer  # the outbox's store (psycopg)

    with services.runtime(optional_database=True) as rt:
        importer = make_importer(rt, replace=replace)
        with _progress(quiet or as_json) as progress:
            task = progress.add_task("importing", total=None, uri="")
            try:
                report = importer.run(
                    records,
                    account=account,
                    progress=lambda n, uri: progress.update(task, completed=n, uri=uri),
                )
            except ImportFileError as exc:
                for err in exc.errors:
                    err_console.print(
                        f"[red]{source}:{err.line}:[/] {err.message}", highlight=False
                    )
                fail(f"{exc.total} bad record(s) in {source}: nothing imported")
    if as_json:
        emit_json(report)
    else:
        err_console.print(
            f"imported {report.records} record(s): {report.written} node(s) written, "
            f"{report.sessions} session owner(s), {report.unchanged} unchanged, "
            f"{report.conflicts} conflict(s); {report.events_queued} index event(s) queued",
            highlight=False,
        )
        for uri in report.conflict_uris:
            err_console.print(f"  [yellow]conflict[/] {uri}", highlight=False)
        for warning in report.warnings:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if report.conflicts:
        raise typer.Exit(1)
