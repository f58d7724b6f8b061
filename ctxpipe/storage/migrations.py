"""Numbered SQL migrations (`sql/NNN_name.sql`) applied in order, once each.

Applied files are recorded in ``{schema}.schema_migrations``; an applied file whose checksum
changed is refused. Every migration runs in its own transaction under a transaction-scoped
advisory lock, so concurrent runners (several workers starting at once) are serialised.

Templating is deliberately tiny: only ``{{schema}}`` and ``{{embedding_dim}}``, both validated
before substitution. Everything else uses parameterised queries.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from ctxpipe.core.errors import StorageError
from ctxpipe.resources import ResourceNotFoundError, resource_dir
from ctxpipe.storage.db import connect_error

log = logging.getLogger(__name__)

_FILE_RE = re.compile(r"^(?P<version>\d{3,})_(?P<slug>[a-z0-9_]+)\.sql$")
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z0-9_]*)\s*\}\}")
_MAX_DIM = 16000  # pgvector's limit for the vector type
# One constant key for every ctxpipe migration run in a database: it also serialises
# `CREATE EXTENSION vector`, which is database-wide.
ADVISORY_LOCK_KEY = int.from_bytes(hashlib.sha256(b"ctxpipe.migrations").digest()[:8], "big") - (
    1 << 63
)


class MigrationError(StorageError):
    """A migration file is invalid, was changed after being applied, or failed to apply."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str  # the file name, e.g. "001_init.sql"
    text: str  # raw file text (checksummed before templating)

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MigrationStatus:
    version: int
    name: str
    applied: bool


def default_sql_dir() -> Path:
    """`sql/` as shipped in the package (`ctxpipe.resources`); the working directory plays no
    part, so `ctxpipe db migrate` runs the same from anywhere."""
    try:
        return resource_dir("sql")
    except ResourceNotFoundError as exc:
        raise MigrationError(str(exc)) from exc


def load_migrations(sql_dir: Path | None = None) -> list[Migration]:
    """All `NNN_name.sql` files of `sql_dir`, ordered by version; duplicates are an error."""
    directory = sql_dir or default_sql_dir()
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        m = _FILE_RE.match(path.name)
        if not m:
            raise MigrationError(f"bad migration file name {path.name!r} (expected NNN_name.sql)")
        version = int(m["version"])
        if version in found:
            raise MigrationError(
                f"two migrations with version {version}: {found[version].name}, {path.name}"
            )
        found[version] = Migration(version, path.name, path.read_text(encoding="utf-8"))
    if not found:
        raise MigrationError(f"no migrations found in {directory}")
    return [found[v] for v in sorted(found)]


def validate_schema(schema: str) -> str:
    if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
        raise MigrationError(
            f"invalid schema name {schema!r}: use lowercase letters, digits and _ (max 63)"
        )
    return schema


def validate_dim(embedding_dim: int) -> int:
    if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int):
        raise MigrationError(f"embedding_dim must be an int, got {embedding_dim!r}")
    if not 1 <= embedding_dim <= _MAX_DIM:
        raise MigrationError(f"embedding_dim must be in 1..{_MAX_DIM}, got {embedding_dim}")
    return embedding_dim


def render(text: str, *, schema: str, embedding_dim: int) -> str:
    """Substitute the two allowed placeholders; any other placeholder is an error."""
    values = {"schema": validate_schema(schema), "embedding_dim": str(validate_dim(embedding_dim))}

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise MigrationError(f"unknown placeholder {{{{{key}}}}} in migration")
        return values[key]

    return _PLACEHOLDER_RE.sub(sub, text)


def _ensure_ledger(conn: psycopg.Connection, schema: str) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL(
                """CREATE TABLE IF NOT EXISTS {}.schema_migrations (
                    version     integer      PRIMARY KEY,
                    name        varchar(256) NOT NULL,
                    checksum    varchar(64)  NOT NULL,
                    applied_at  timestamptz  NOT NULL DEFAULT now())"""
            ).format(sql.Identifier(schema))
        )


def _applied(conn: psycopg.Connection, schema: str) -> dict[int, tuple[str, str]]:
    rows = conn.execute(
        sql.SQL("SELECT version, name, checksum FROM {}.schema_migrations").format(
            sql.Identifier(schema)
        )
    ).fetchall()
    return {int(v): (n, c) for v, n, c in rows}


def _check_checksums(migrations: list[Migration], applied: dict[int, tuple[str, str]]) -> None:
    for mig in migrations:
        if mig.version in applied and applied[mig.version][1] != mig.checksum:
            raise MigrationError(
                f"migration {mig.name} was changed after it was applied "
                f"(checksum {applied[mig.version][1][:12]}… in the database, "
                f"{mig.checksum[:12]}… on disk); add a new migration instead of editing it"
            )


def _check_dim(conn: psycopg.Connection, schema: str, embedding_dim: int) -> None:
    row = conn.execute(
        """SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relname = 'context_chunks'
             AND a.attname = 'embedding' AND NOT a.attisdropped""",
        (schema,),
    ).fetchone()
    if row is None:
        return
    expected = f"vector({embedding_dim})"
    if row[0] != expected:
        raise MigrationError(
            f"{schema}.context_chunks.embedding is {row[0]} but embedding_dim={embedding_dim}; "
            "use a new schema (CTXPIPE_DB_SCHEMA) or rebuild the replica from the FS"
        )


def migrate(
    conninfo: str,
    *,
    schema: str = "ctx",
    embedding_dim: int,
    sql_dir: Path | None = None,
) -> list[str]:
    """Apply pending migrations; return the names applied (empty when up to date)."""
    validate_schema(schema)
    validate_dim(embedding_dim)
    migrations = load_migrations(sql_dir)
    applied_now: list[str] = []
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            _ensure_ledger(conn, schema)
            _check_checksums(migrations, _applied(conn, schema))
            for mig in migrations:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
                    applied = _applied(conn, schema)  # re-read under the lock
                    _check_checksums([mig], applied)
                    if mig.version in applied:
                        continue
                    body = render(mig.text, schema=schema, embedding_dim=embedding_dim)
                    try:
                        conn.execute(body.encode("utf-8"))
                    except psycopg.Error as exc:
                        raise MigrationError(f"migration {mig.name} failed: {exc}") from exc
                    conn.execute(
                        sql.SQL(
                            "INSERT INTO {}.schema_migrations (version, name, checksum) "
                            "VALUES (%s, %s, %s)"
                        ).format(sql.Identifier(schema)),
                        (mig.version, mig.name, mig.checksum),
                    )
                    log.info("applied migration %s to schema %s", mig.name, schema)
                    applied_now.append(mig.name)
            _check_dim(conn, schema, embedding_dim)
    except psycopg.OperationalError as exc:
        raise connect_error(conninfo, exc) from exc
    return applied_now


def status(
    conninfo: str, *, schema: str = "ctx", sql_dir: Path | None = None
) -> list[MigrationStatus]:
    """Every migration on disk and whether it is applied (checksums are verified)."""
    validate_schema(schema)
    migrations = load_migrations(sql_dir)
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            exists = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.schema_migrations",)
            ).fetchone()
            applied = _applied(conn, schema) if exists and exists[0] else {}
    except psycopg.OperationalError as exc:
        raise connect_error(conninfo, exc) from exc
    _check_checksums(migrations, applied)
    return [MigrationStatus(m.version, m.name, m.version in applied) for m in migrations]


__all__ = [
    "ADVISORY_LOCK_KEY",
    "Migration",
    "MigrationError",
    "MigrationStatus",
    "default_sql_dir",
    "load_migrations",
    "migrate",
    "render",
    "status",
]
