"""`ctxpipe dev up | down | status | logs`: the local stack as background processes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from ctxpipe.cli.app import app, console, emit_json, handle_errors, settings
from ctxpipe.core.config import Settings

if TYPE_CHECKING:
    from ctxpipe.devstack import DevStack, StackStatus

dev_app = typer.Typer(
    help="Local development stack: PostgreSQL + pgvector, Redis, Celery workers, beat, Flower.",
    no_args_is_help=True,
)
app.add_typer(dev_app, name="dev")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def make_stack(cfg: Settings, concurrency: int = 2) -> DevStack:
    from ctxpipe.devstack import DevStack  # the servers' code (psycopg) when a command runs

    return DevStack(cfg, concurrency=concurrency)


def render(status: StackStatus, *, show_action: bool) -> Table:
    table = Table(
        title=f"ctxpipe dev stack in {status.dev_dir}", title_justify="left", box=box.SIMPLE_HEAD
    )
    table.add_column("component", style="bold", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("pid", justify="right", no_wrap=True)
    table.add_column("port / node", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for c in status.components:
        if show_action and c.action:
            state = Text(c.action, style="green" if c.alive else "red")
        else:
            state = Text("running" if c.alive else "stopped", style="green" if c.alive else "red")
        if c.alive and not c.managed:
            state = Text("external", style="cyan")
        where = c.endpoint if c.kind == "worker" else f":{c.port}" if c.port else ""
        detail = c.detail + (f" (restarted {c.restarts}×)" if c.restarts else "")
        table.add_row(c.name, state, str(c.pid or "-"), where, detail)
    return table


def print_logs_hint(status: StackStatus) -> None:
    console.print(
        f"logs: {status.dev_dir}/logs/<component>.log, pg/server.log, redis/redis.log "
        "(`ctxpipe dev logs COMPONENT`)",
        highlight=False,
        style="dim",
    )


def print_hints(cfg: Settings, status: StackStatus) -> None:
    flower = next((c for c in status.components if c.kind == "flower"), None)
    if flower is not None and flower.alive:
        console.print(
            f"Flower: [bold]{flower.endpoint}[/] (user [bold]{cfg.flower_user}[/], password from "
            "CTXPIPE_FLOWER_PASSWORD)",
            highlight=False,
        )
    api = next((c for c in status.components if c.kind == "api"), None)
    if api is not None and api.alive:
        console.print(f"HTTP API: [bold]{api.endpoint}[/] (OpenAPI at /docs)", highlight=False)
    console.print("Stop everything with [bold]ctxpipe dev down[/]", highlight=False)


@dev_app.command("up")
@handle_errors
def up_cmd(
    as_json: JsonOpt = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="seconds to wait until all are ready")
    ] = 120.0,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="prefork children of commit/extract")
    ] = 2,
) -> None:
    """Start whatever is not running yet and wait until every piece is ready."""
    cfg = settings()
    stack = make_stack(cfg, concurrency)
    started = time.monotonic()
    if as_json:
        status = stack.up(timeout=timeout)
        emit_json(status)
        return
    with console.status("starting the dev stack…") as spinner:

        def notify(name: str, msg: str) -> None:
            spinner.update(f"{name}: {msg}")

        status = stack.up(timeout=timeout, notify=notify)
    console.print(render(status, show_action=True))
    print_logs_hint(status)
    console.print(f"ready in {time.monotonic() - started:.1f}s", highlight=False)
    print_hints(cfg, status)


@dev_app.command("down")
@handle_errors
def down_cmd(
    as_json: JsonOpt = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="seconds between SIGTERM and SIGKILL")
    ] = 15.0,
) -> None:
    """Stop every process of the stack (SIGTERM, then SIGKILL after --timeout)."""
    stack = make_stack(settings())
    started = time.monotonic()
    if as_json:
        emit_json(stack.down(timeout=timeout))
        return
    with console.status("stopping the dev stack…") as spinner:
        status = stack.down(timeout=timeout, notify=lambda n, m: spinner.update(f"{n}: {m}"))
    console.print(render(status, show_action=True))
    console.print(f"stopped in {time.monotonic() - started:.1f}s", highlight=False)


@dev_app.command("status")
@handle_errors
def status_cmd(as_json: JsonOpt = False) -> None:
    """Show which pieces are alive (pid, port or Celery node, log file)."""
    cfg = settings()
    status = make_stack(cfg).status()
    if as_json:
        emit_json(status)
        return
    console.print(render(status, show_action=False))
    print_logs_hint(status)
    console.print(f"{status.running}/{len(status.components)} running", highlight=False)
    if status.running:
        print_hints(cfg, status)


@dev_app.command("supervise", hidden=True)
@handle_errors
def supervise_cmd(
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 2,
    interval: Annotated[float, typer.Option("--interval", min=0.1)] = 1.0,
) -> None:
    """Restart dead workers, beat and Flower (started by `dev up`, stopped by `dev down`)."""
    from ctxpipe.devstack.supervisor import supervise

    supervise(make_stack(settings(), concurrency=concurrency), interval=interval)


@dev_app.command("logs")
@handle_errors
def logs_cmd(
    name: Annotated[str, typer.Argument(help="component, e.g. worker-commit, beat, postgres")],
    lines: Annotated[int, typer.Option("--lines", "-n", min=1)] = 40,
) -> None:
    """Print the last lines of a component's log."""
    from ctxpipe.storage.netutil import tail

    status = make_stack(settings()).status()
    try:
        log = status.get(name).log
    except KeyError:
        names = ", ".join(c.name for c in status.components)
        raise ValueError(f"no component {name!r} (one of: {names})") from None
    if not log:
        raise ValueError(f"{name} is external: no local log")
    console.print(Text(tail(log, lines)))
