"""`ctxpipe db …`: schema migrations of the PostgreSQL index replica."""

from __future__ import annotations

import typer

from ctxpipe.cli.app import app, console, emit_json, handle_errors, settings

db_app = typer.Typer(
    help="Index replica database (PostgreSQL + pgvector): migrations and status.",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")

JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON.")


@db_app.command("migrate")
@handle_errors
def migrate_cmd(as_json: bool = JSON_OPT) -> None:
    """Apply pending sql/ migrations to CTXPIPE_DATABASE_URL (schema CTXPIPE_DB_SCHEMA)."""
    from ctxpipe.storage.db import redact
    from ctxpipe.storage.migrations import migrate

    cfg = settings()
    applied = migrate(cfg.database_url, schema=cfg.db_schema, embedding_dim=cfg.embedding_dim)
    if as_json:
        emit_json(
            {"database": redact(cfg.database_url), "schema": cfg.db_schema, "applied": applied}
        )
        return
    if not applied:
        console.print(f"schema {cfg.db_schema} is up to date ({redact(cfg.database_url)})")
        return
    for name in applied:
        console.print(f"applied {name}", highlight=False)
    console.print(f"schema {cfg.db_schema}: {len(applied)} migration(s) applied")


@db_app.command("status")
@handle_errors
def status_cmd(as_json: bool = JSON_OPT) -> None:
    """List the migrations on disk and whether each one is applied."""
    from ctxpipe.storage.db import redact
    from ctxpipe.storage.migrations import status

    cfg = settings()
    rows = status(cfg.database_url, schema=cfg.db_schema)
    if as_json:
        emit_json(
            {
                "database": redact(cfg.database_url),
                "schema": cfg.db_schema,
                "migrations": [
                    {"version": r.version, "name": r.name, "applied": r.applied} for r in rows
                ],
            }
        )
        return
    for r in rows:
        console.print(f"{'applied' if r.applied else 'pending':8} {r.name}", highlight=False)
    pending = sum(not r.applied for r in rows)
    console.print("up to date" if not pending else f"{pending} pending", highlight=False)
