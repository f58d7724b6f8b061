"""`ctxpipe session add|close|cut-idle`: open sessions from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, handle_errors
from ctxpipe.cli.commit_cmds import load_session
from ctxpipe.client.session_models import SessionAppended
from ctxpipe.core.session import RequestContext

if TYPE_CHECKING:
    from ctxpipe.service import ContextEngineService

session_app = typer.Typer(
    help="Open sessions: append messages as they come; commits are cut by size, idle time "
    "or a close.",
    no_args_is_help=True,
)
app.add_typer(session_app, name="session")

InlineOpt = typer.Option(False, "--inline", help="run the cut commits in this process")
JsonOpt = typer.Option(False, "--json", help="print the result as JSON")


def _service(inline: bool) -> ContextEngineService:
    return services.build_service(commits="in-process" if inline else "celery")


def _show(out: SessionAppended, as_json: bool) -> None:
    if as_json:
        emit_json(out)
        return
    console.print(
        f"session [bold]{out.session_id}[/]: {out.appended} appended, {out.duplicates} already "
        f"held; open: {out.open_messages} messages, {out.open_tokens} tokens"
    )
    for commit_id in out.commit_ids:
        console.print(f"  cut commit [bold]{commit_id}[/]")


@session_app.command("add")
@handle_errors
def session_add(
    file: Path = typer.Argument(..., help="session JSON (as for `ctxpipe commit`)"),
    close: bool = typer.Option(False, "--close", help="then commit what is open"),
    inline: bool = InlineOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Append the file's messages to its open session (ids it holds are skipped)."""
    session = load_session(file)
    service = _service(inline)
    try:
        _show(service.add_messages(session.context(), session.messages, close=close), as_json)
    finally:
        service.close()


@session_app.command("close")
@handle_errors
def session_close(
    account: str = typer.Option(..., "--account", "-a"),
    user: str = typer.Option(..., "--user", "-u"),
    session: str = typer.Option(..., "--session", "-s"),
    agent: str = typer.Option("default", "--agent"),
    inline: bool = InlineOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Commit what is still open of a session now."""
    ctx = RequestContext(account_id=account, user_id=user, agent_id=agent, session_id=session)
    service = _service(inline)
    try:
        _show(service.close_session(ctx), as_json)
    finally:
        service.close()


@session_app.command("cut-idle")
@handle_errors
def session_cut_idle(inline: bool = InlineOpt, as_json: bool = JsonOpt) -> None:
    """What the beat job does: submit cuts left unsubmitted, then cut every session idle for
    CTXPIPE_SESSION_IDLE_COMMIT_S."""
    service = _service(inline)
    try:
        done = service.open_sessions.cut_idle()
    finally:
        service.close()
    if as_json:
        emit_json({"commit_ids": done})
    else:
        console.print(f"{len(done)} commits submitted" + "".join(f"\n  {c}" for c in done))
