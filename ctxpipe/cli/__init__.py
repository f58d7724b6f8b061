"""The `ctxpipe` command (Typer + Rich). This package is the composition root."""

from __future__ import annotations

import importlib

from ctxpipe.cli.app import app

# Each module registers its commands on `app` when imported.
_COMMAND_MODULES = (
    "fs_cmds",
    "db_cmds",
    "commit_cmds",
    "dev_cmds",
    "demo_cmds",
    "index_cmds",
    "status_cmds",
    "retrieval_cmds",
    "maintenance_cmds",
    "api_cmds",
    "portability_cmds",
    "session_cmds",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"ctxpipe.cli.{_name}")


def main() -> None:
    import sys

    from ctxpipe.observability.logs import configure_logging
    from ctxpipe.observability.tracing import TracingConfigError, configure_tracing

    configure_logging()  # one line per event, with the commit id and the trace id
    try:  # off unless OTEL_TRACES_EXPORTER names an exporter
        configure_tracing("ctxpipe-api" if sys.argv[1:2] == ["serve"] else "ctxpipe-cli")
    except TracingConfigError as exc:
        sys.exit(f"ctxpipe: {exc}")
    app()


__all__ = ["app", "main"]
