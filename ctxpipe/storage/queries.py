"""Named SQL queries loaded from `sql/queries/*.sql`.

Each file holds blocks introduced by ``-- name: <query_name>``. Queries use psycopg named
parameters (``%(x)s``); the only template is ``{{schema}}``, validated before substitution.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ctxpipe.core.errors import StorageError
from ctxpipe.storage.migrations import default_sql_dir

_NAME_RE = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.M)
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _parse(text: str, source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    marks = list(_NAME_RE.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[m.end() : end].strip()
        if m.group(1) in out:
            raise StorageError(f"duplicate query name {m.group(1)!r} in {source}")
        out[m.group(1)] = body
    return out


@lru_cache(maxsize=8)
def _load(directory: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(Path(directory).glob("*.sql")):
        for name, body in _parse(path.read_text(encoding="utf-8"), path.name).items():
            if name in queries:
                raise StorageError(f"query {name!r} defined twice (again in {path.name})")
            queries[name] = body
    return queries


class Queries:
    """`Queries("ctx")["outbox_append"]` → SQL text with the schema filled in."""

    def __init__(self, schema: str = "ctx", directory: Path | None = None) -> None:
        if not _SCHEMA_RE.match(schema):
            raise StorageError(f"invalid schema name {schema!r}")
        self._schema = schema
        self._dir = str(directory or default_sql_dir() / "queries")

    def __getitem__(self, name: str) -> str:
        try:
            body = _load(self._dir)[name]
        except KeyError:
            raise StorageError(f"unknown SQL query {name!r}") from None
        return body.replace("{{schema}}", self._schema)
