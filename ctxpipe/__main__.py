"""`python -m ctxpipe` and the `ctxpipe` command.

The command is the server's (`pip install 'ctxpipe[server]'`); on a client-only install it
says so in one line instead of a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from ctxpipe.cli import main as cli_main
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "ctxpipe":
            raise  # our own bug, not a missing install
        sys.exit(
            f"ctxpipe: the command needs the server install (missing module {exc.name!r}): "
            "pip install 'ctxpipe[server]'"
        )
    cli_main()


if __name__ == "__main__":
    main()
