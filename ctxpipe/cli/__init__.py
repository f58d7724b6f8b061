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
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"ctxpipe.cli.{_name}")


def main() -> None:
    app()


__all__ = ["app", "main"]
