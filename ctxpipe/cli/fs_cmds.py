"""FS commands: ls, cat, stat, tree."""

from __future__ import annotations

from ctxpipe.cli.app import app  # noqa: F401
