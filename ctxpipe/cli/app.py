"""The root Typer app, shared options, and uniform error reporting for every command."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from ctxpipe.cli.consoles import Console
from ctxpipe.core.config import Settings
from ctxpipe.core.errors import CtxError

app = typer.Typer(
    name="ctxpipe",
    help="ctxpipe: a context database for AI agents, built as a Celery pipeline.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

# The pool logs every failed reconnection attempt; a command reports the outcome in one line.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def settings() -> Settings:
    """Settings from the environment (`CTXPIPE_*`)."""
    return Settings()


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for e in exc.errors()[:3]:
            loc = ".".join(str(x) for x in e["loc"]) or "input"
            parts.append(f"{loc}: {e['msg']}")
        return "invalid input: " + "; ".join(parts)
    return " ".join(str(exc).split()) or type(exc).__name__


def handle_errors(fn: F) -> F:
    """Turn any error into one clear line on stderr and exit status 2 (never a traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except (CtxError, ValidationError, ValueError, OSError, RuntimeError) as exc:
            fail(_one_line(exc))
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except Exception as exc:
            # a database error can only come from a command that imported psycopg: the
            # commands that need no database do not load it
            pg = sys.modules.get("psycopg")
            if pg is None or not isinstance(exc, pg.Error):
                raise
            hint = ""
            if isinstance(exc, pg.errors.UndefinedTable | pg.errors.InvalidSchemaName):
                hint = " (run `ctxpipe db migrate`)"
            fail(f"database error: {_one_line(exc)}{hint}")

    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    """Print JSON to stdout (pydantic models and lists of them included)."""
    if isinstance(data, BaseModel):
        text = data.model_dump_json(indent=2)
    else:

        def default(o: Any) -> Any:
            if isinstance(o, BaseModel):
                return o.model_dump(mode="json")
            return str(o)

        text = json.dumps(data, indent=2, default=default, ensure_ascii=False)
    sys.stdout.write(text + "\n")
