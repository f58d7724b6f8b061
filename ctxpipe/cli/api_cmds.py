"""`ctxpipe serve` (the HTTP API), `ctxpipe keys create|list|revoke`, `ctxpipe mcp`.

This module is the API's composition root: commits submitted through the API are enqueued on
Celery (`services.build_service`, like every command that enqueues commits)."""

from __future__ import annotations

import gc
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.table import Table

from ctxpipe.cli import services
from ctxpipe.cli.app import app, console, emit_json, fail, handle_errors, settings
from ctxpipe.core.config import Settings

log = logging.getLogger("ctxpipe.api")


def warm(service: Any) -> None:
    """Load the embedding model and the read path in the background, so the first find of a
    fresh process does not pay for it (`warm_now`)."""
    threading.Thread(target=warm_now, args=(service,), name="ctxpipe-api-warm", daemon=True).start()


def warm_now(service: Any) -> None:
    """Build the read path and load what its first find would (the model, the parsers), then
    move every object alive after that out of the garbage collector's way (`gc.freeze`): the
    model and the libraries are some 500,000 objects that a full collection otherwise walks
    in the middle of a request — timing find on LoCoMo, the slowest took 272-294 ms without it
    and 58-65 ms with it (p50 and p95 unchanged)."""
    try:
        service.read_path.finder.warm()  # builds the read path, loads the model
    except Exception as exc:  # noqa: BLE001 - the first request loads it instead
        log.warning("API warm-up failed: %s", exc)
        return
    gc.collect()  # what is garbage now is not kept for good
    gc.freeze()


def _one_torch_thread() -> None:
    threads = int(os.environ.get("OMP_NUM_THREADS") or 1)
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def app_factory() -> Any:
    """The ASGI app of one API process (uvicorn calls this in every worker)."""
    from ctxpipe.api import create_app
    from ctxpipe.observability.tracing import configure_tracing, instrument_fastapi

    cfg = settings()
    configure_tracing("ctxpipe-api")  # a worker process of `--workers N` sets up its own
    _one_torch_thread()
    service = services.build_service(cfg, commits="celery")  # reads run in this process
    warm(service)
    app = create_app(cfg, service)
    instrument_fastapi(app)  # a server span per request, when tracing is on
    return app


@app.command("serve")
@handle_errors
def serve_cmd(
    host: Annotated[str | None, typer.Option("--host", help="bind address")] = None,
    port: Annotated[int | None, typer.Option("--port", min=1, max=65535)] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=64)] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """Serve the HTTP API (/v1, /healthz, /readyz, /metrics, OpenAPI at /docs)."""
    import uvicorn

    from ctxpipe.observability.logs import uvicorn_log_config

    cfg = settings()
    # Requests run on a pool of threads: one torch thread each (OpenMP teams per calling
    # thread would oversubscribe the cores); parallelism comes from requests and --workers.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    uvicorn.run(
        "ctxpipe.cli.api_cmds:app_factory",
        factory=True,
        host=host or cfg.api_host,
        port=port or cfg.api_port,
        workers=workers or cfg.api_workers,
        log_level=log_level,
        log_config=uvicorn_log_config(log_level),  # one line per event, with the trace id
        access_log=False,  # the histogram counts requests; keys must never reach a log
        server_header=False,
    )


keys_app = typer.Typer(help="API keys (only a hash is stored).", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


@contextmanager
def _store(cfg: Settings) -> Iterator[Any]:
    from ctxpipe.api.keys import KeyStore

    with services.database(cfg) as db:
        yield KeyStore(db, schema=cfg.db_schema, cache_s=0)


@keys_app.command("create")
@handle_errors
def keys_create(
    account: Annotated[str, typer.Option("--account", "-a", help="account id")],
    scopes: Annotated[str, typer.Option("--scopes", help="read,commit[,admin]")] = "read",
    user: Annotated[str | None, typer.Option("--user", "-u", help="bind to this user")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="bind to this agent")] = None,
    name: Annotated[str, typer.Option("--name", help="a label")] = "",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a key and print it (once: only its hash is kept)."""
    from ctxpipe.api.keys import KeySpec

    if user and agent:
        fail("bind a key to --user or to --agent, not both")
    spec = KeySpec(
        account_id=account,
        user_id=user,
        agent_id=agent,
        scopes=[s.strip() for s in scopes.split(",") if s.strip()],  # type: ignore[misc]
        name=name,
    )
    cfg = settings()
    with _store(cfg) as store:
        created = store.create(spec)
    if as_json:
        emit_json(created)
        return
    r = created.record
    bound = f"user {r.user_id}" if r.user_id else f"agent {r.agent_id}" if r.agent_id else "-"
    console.print(
        f"key [bold]{r.key_id}[/] for account {r.account_id} (bound: {bound}; scopes "
        f"{','.join(s.value for s in r.scopes)}); shown once, store it now:",
        highlight=False,
    )
    typer.echo(created.key)


@keys_app.command("list")
@handle_errors
def keys_list(
    account: Annotated[str | None, typer.Option("--account", "-a")] = None,
    include_revoked: Annotated[bool, typer.Option("--all", help="revoked keys too")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Keys (never their secrets)."""
    cfg = settings()
    with _store(cfg) as store:
        keys = store.list(account, include_revoked)
    if as_json:
        emit_json(keys)
        return
    table = Table("key", "account", "user", "agent", "scopes", "name", "created", "revoked")
    for k in keys:
        table.add_row(
            k.key_id,
            k.account_id,
            k.user_id or "",
            k.agent_id or "",
            ",".join(s.value for s in k.scopes),
            k.name,
            f"{k.created_at:%Y-%m-%d %H:%M}" if k.created_at else "",
            f"{k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "",
        )
    console.print(table if keys else "[dim]no keys[/]")


@keys_app.command("revoke")
@handle_errors
def keys_revoke(key_id: Annotated[str, typer.Argument(help="the key id (not the key)")]) -> None:
    """Revoke a key (API processes stop accepting it within CTXPIPE_API_KEY_CACHE_S)."""
    cfg = settings()
    with _store(cfg) as store:
        done = store.revoke(key_id)
    if not done:
        fail(f"no active key {key_id}")
    console.print(f"revoked {key_id}")


@app.command("mcp")
@handle_errors
def mcp_cmd(
    transport: Annotated[
        str, typer.Option("--transport", help="stdio | http (streamable HTTP)")
    ] = "stdio",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8090,
    api_url: Annotated[
        str | None, typer.Option("--api-url", help="the API the tools call (CTXPIPE_API_URL)")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="CTXPIPE_API_KEY",
            show_default=False,
            help="key for stdio (over HTTP each request brings its own)",
        ),
    ] = None,
) -> None:
    """Serve the MCP tools find, search, build_context, read, commit_session."""
    from ctxpipe.mcp_server import build_server

    server = build_server(api_url or settings().api_url, api_key)
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        server.run("streamable-http", host=host, port=port)
    else:
        fail(f"unknown transport {transport!r} (stdio or http)")
