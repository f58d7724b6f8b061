"""Migrations, schema shape and the connection pool against the real embedded PostgreSQL."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from ctxpipe.core.errors import StorageError
from ctxpipe.storage.db import Database, redact, wait_ready
from ctxpipe.storage.migrations import (
    MigrationError,
    default_sql_dir,
    load_migrations,
    migrate,
    render,
    status,
)

ALL = [m.name for m in load_migrations()]
TABLES = {
    "context_nodes",
    "context_chunks",
    "relation_edges",
    "outbox_events",
    "session_archives",
    "repair_runs",
    "commits",
    "schema_migrations",
}


@pytest.fixture
def fresh_schema(pg_url: str) -> Iterator[str]:
    """A schema name no other test uses; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _one(url: str, query: str, *params: object) -> object:
    with psycopg.connect(url) as conn:
        row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _index_methods(url: str, schema: str, table: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """SELECT ic.relname, am.amname
               FROM pg_index i
               JOIN pg_class ic ON ic.oid = i.indexrelid
               JOIN pg_class tc ON tc.oid = i.indrelid
               JOIN pg_namespace n ON n.oid = tc.relnamespace
               JOIN pg_am am ON am.oid = ic.relam
               WHERE n.nspname = %s AND tc.relname = %s""",
            (schema, table),
        ).fetchall()
    return {name: am for name, am in rows}


# --------------------------------------------------------------------------- migrate


def test_session_schema_is_migrated_and_second_run_applies_nothing(pg_url: str) -> None:
    assert migrate(pg_url, schema="ctx", embedding_dim=384) == []
    assert all(s.applied for s in status(pg_url, schema="ctx"))


def test_fresh_schema_applies_all_then_nothing(pg_url: str, fresh_schema: str) -> None:
    assert [s.applied for s in status(pg_url, schema=fresh_schema)] == [False] * len(ALL)
    assert migrate(pg_url, schema=fresh_schema, embedding_dim=8) == ALL
    assert ALL[:2] == ["001_init.sql", "002_commit_ledger.sql"]
    assert migrate(pg_url, schema=fresh_schema, embedding_dim=8) == []
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version, name, length(checksum) FROM {}.schema_migrations").format(
                sql.Identifier(fresh_schema)
            )
        ).fetchall()
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (fresh_schema,)
            )
        }
    assert [(v, n) for v, n, _ in rows] == [(i + 1, n) for i, n in enumerate(ALL)]
    assert all(length == 64 for _, _, length in rows)
    assert TABLES <= tables


def test_vector_extension_exists(pg_url: str) -> None:
    version = _one(pg_url, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    assert str(version).startswith("0.8")


def test_hnsw_and_gin_indexes(pg_url: str) -> None:
    chunks = _index_methods(pg_url, "ctx", "context_chunks")
    assert chunks["idx_chunks_embedding"] == "hnsw"
    assert chunks["idx_chunks_tsv"] == "gin"
    assert _index_methods(pg_url, "ctx", "context_nodes")["idx_context_nodes_metadata"] == "gin"
    indexdef = str(
        _one(pg_url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_chunks_embedding'")
    )
    assert "vector_cosine_ops" in indexdef
    assert "m='16'" in indexdef and "ef_construction='64'" in indexdef
    outbox = str(_one(pg_url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_outbox_due'"))
    assert "WHERE" in outbox and "next_attempt_at" in outbox


def test_embedding_column_has_configured_dimension(pg_url: str, fresh_schema: str) -> None:
    query = """SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
               JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = %s AND c.relname = 'context_chunks' AND a.attname = 'embedding'"""
    assert _one(pg_url, query, "ctx") == "vector(384)"
    migrate(pg_url, schema=fresh_schema, embedding_dim=12)
    assert _one(pg_url, query, fresh_schema) == "vector(12)"
    with pytest.raises(MigrationError, match=r"vector\(12\).*embedding_dim=384"):
        migrate(pg_url, schema=fresh_schema, embedding_dim=384)


def test_tsv_is_generated_and_outbox_status_is_checked(pg_url: str, fresh_schema: str) -> None:
    migrate(pg_url, schema=fresh_schema, embedding_dim=3)
    s = sql.Identifier(fresh_schema)
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.context_nodes (uri, account_id, owner_space, version) "
                "VALUES ('ctx://a/users/u/memories/x', 'a', 'users/u', 1)"
            ).format(s)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.context_chunks (chunk_id, uri, account_id, level, text_content) "
                "VALUES ('c1', 'ctx://a/users/u/memories/x', 'a', 0, 'Running quickly')"
            ).format(s)
        )
        hit = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.context_chunks WHERE tsv @@ to_tsquery('run')").format(
                s
            )
        ).fetchone()
        assert hit == (1,)
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.outbox_events (event_id, event_type, uri, status) "
                    "VALUES ('e1', 'UPSERT_CONTEXT', 'ctx://a', 'bogus')"
                ).format(s)
            )


def _chunk_with_vector(conn: psycopg.Connection, schema: str, cid: str, dim: int) -> None:
    """A chunk row over 2 kB whose largest value is its vector of `dim` values (a text of a
    dozen words, as most chunks are)."""
    s = sql.Identifier(schema)
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.context_nodes (uri, account_id, owner_space, version) "
            "VALUES ('ctx://a/users/u/memories/' || %s, 'a', 'users/u', 1)"
        ).format(s),
        (cid,),
    )
    words = " ".join(uuid.uuid4().hex for _ in range(12))
    vector = "[" + ",".join(f"{x:.6f}" for x in np.random.default_rng(7).random(dim)) + "]"
    conn.execute(
        sql.SQL(
            "INSERT INTO {}.context_chunks (chunk_id, uri, account_id, level, text_content, "
            "embedding) VALUES (%s, 'ctx://a/users/u/memories/' || %s, 'a', 2, %s, %s::vector)"
        ).format(s),
        (cid, cid, words, vector),
    )


def _out_of_line(conn: psycopg.Connection, schema: str, column: str, cid: str) -> bool:
    query = sql.SQL(
        "SELECT pg_column_toast_chunk_id({}) IS NOT NULL FROM {}.context_chunks WHERE chunk_id = %s"
    ).format(sql.Identifier(column), sql.Identifier(schema))
    row = conn.execute(query, (cid,)).fetchone()
    assert row is not None
    return bool(row[0])


def test_vectors_and_tsvectors_stay_in_the_row(
    pg_url: str, fresh_schema: str, tmp_path: Path
) -> None:
    """An exact scan reads every row's vector (and the text arm its tsvector): a row over 2 kB
    moved its 384-dimension vector to the TOAST table before migration 011, and keeps it in the
    row after it (the text goes out instead); vectors too large for that stay external."""
    before = tmp_path / "sql"
    shutil.copytree(default_sql_dir(), before)
    (before / "011_inline_vectors.sql").unlink()
    migrate(pg_url, schema=fresh_schema, embedding_dim=384, sql_dir=before)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _chunk_with_vector(conn, fresh_schema, "old", 384)
        assert _out_of_line(conn, fresh_schema, "embedding", "old")
    assert migrate(pg_url, schema=fresh_schema, embedding_dim=384)[:1] == ["011_inline_vectors.sql"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _chunk_with_vector(conn, fresh_schema, "new", 384)
        assert not _out_of_line(conn, fresh_schema, "embedding", "new")
        assert not _out_of_line(conn, fresh_schema, "tsv", "new")
        storage = dict(
            conn.execute(
                "SELECT c.relname, a.attstorage FROM pg_attribute a "
                "JOIN pg_class c ON c.oid = a.attrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND a.attname = 'embedding' AND c.relkind = 'r'",
                (fresh_schema,),
            ).fetchall()
        )
    assert storage == {"context_chunks": "p", "chunk_units": "p"}


def test_a_vector_too_large_for_the_row_stays_external(pg_url: str, fresh_schema: str) -> None:
    migrate(pg_url, schema=fresh_schema, embedding_dim=2000)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        _chunk_with_vector(conn, fresh_schema, "big", 2000)  # 8 kB: no page holds it and more
        assert _out_of_line(conn, fresh_schema, "embedding", "big")
        assert not _out_of_line(conn, fresh_schema, "tsv", "big")


def test_changed_checksum_is_refused(pg_url: str, fresh_schema: str, tmp_path: Path) -> None:
    sql_dir = tmp_path / "sql"
    shutil.copytree(default_sql_dir(), sql_dir, ignore=shutil.ignore_patterns("queries"))
    migrate(pg_url, schema=fresh_schema, embedding_dim=4, sql_dir=sql_dir)
    first = sql_dir / ALL[0]
    first.write_text(first.read_text() + "\n-- edited after release\n")
    (sql_dir / "999_later.sql").write_text("CREATE TABLE {{schema}}.later (x int);\n")
    with pytest.raises(MigrationError, match=rf"{ALL[0]} was changed after it was applied"):
        migrate(pg_url, schema=fresh_schema, embedding_dim=4, sql_dir=sql_dir)
    with pytest.raises(MigrationError, match="changed"):
        status(pg_url, schema=fresh_schema, sql_dir=sql_dir)
    later = _one(pg_url, "SELECT to_regclass(%s) IS NULL", f"{fresh_schema}.later")
    assert later is True  # nothing applied after the refusal


def test_failed_migration_rolls_back_and_is_not_recorded(
    pg_url: str, fresh_schema: str, tmp_path: Path
) -> None:
    sql_dir = tmp_path / "sql"
    sql_dir.mkdir()
    (sql_dir / "001_ok.sql").write_text("CREATE SCHEMA IF NOT EXISTS {{schema}};\n")
    (sql_dir / "002_bad.sql").write_text(
        "CREATE TABLE {{schema}}.half (x int);\nSELECT no_such_function();\n"
    )
    with pytest.raises(MigrationError, match="002_bad.sql failed"):
        migrate(pg_url, schema=fresh_schema, embedding_dim=4, sql_dir=sql_dir)
    assert _one(pg_url, "SELECT to_regclass(%s) IS NULL", f"{fresh_schema}.half") is True
    assert [s.applied for s in status(pg_url, schema=fresh_schema, sql_dir=sql_dir)] == [
        True,
        False,
    ]


def test_concurrent_runners_apply_each_migration_once(pg_url: str, fresh_schema: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        try:
            barrier.wait()
            results.append(migrate(pg_url, schema=fresh_schema, embedding_dim=16))
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(n for r in results for n in r) == sorted(ALL)


# --------------------------------------------------------------------------- templating


@pytest.mark.parametrize("schema", ["Ctx", "1abc", "a-b", "ctx;drop", "a" * 64, ""])
def test_render_rejects_bad_schema(schema: str) -> None:
    with pytest.raises(MigrationError, match="invalid schema"):
        render("{{schema}}", schema=schema, embedding_dim=3)


@pytest.mark.parametrize("dim", [0, -1, 16001, True, "384"])
def test_render_rejects_bad_dim(dim: object) -> None:
    with pytest.raises(MigrationError, match="embedding_dim"):
        render("{{embedding_dim}}", schema="ctx", embedding_dim=dim)  # type: ignore[arg-type]


def test_render_substitutes_only_known_placeholders() -> None:
    assert render("{{schema}}.t vector({{ embedding_dim }})", schema="s", embedding_dim=7) == (
        "s.t vector(7)"
    )
    with pytest.raises(MigrationError, match="unknown placeholder"):
        render("{{user}}", schema="s", embedding_dim=7)


def test_bad_file_names_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "init.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="bad migration file name"):
        load_migrations(tmp_path)


def test_unreachable_server_is_one_clear_error() -> None:
    with pytest.raises(
        StorageError, match=r"cannot connect to PostgreSQL at ctxpipe@127\.0\.0\.1:1/"
    ):
        migrate("postgresql://ctxpipe:secret@127.0.0.1:1/ctxpipe", embedding_dim=3)
    assert "secret" not in redact("postgresql://ctxpipe:secret@127.0.0.1:1/ctxpipe")


# --------------------------------------------------------------------------- pool


def test_pool_registers_vector_and_round_trips(database: Database, clean_db: str) -> None:
    vec = np.arange(384, dtype=np.float32) / 384
    with database.connection() as conn:
        conn.execute(
            "INSERT INTO ctx.context_nodes (uri, account_id, owner_space, version) "
            "VALUES (%s, 'a', 'users/u', 1)",
            ("ctx://a/users/u/memories/v",),
        )
        conn.execute(
            "INSERT INTO ctx.context_chunks (chunk_id, uri, account_id, level, text_content,"
            " embedding) VALUES ('v0', %s, 'a', 0, 'hello', %s)",
            ("ctx://a/users/u/memories/v", vec),
        )
    with database.connection() as conn:
        row = conn.execute(
            "SELECT embedding, embedding <=> %s FROM ctx.context_chunks WHERE chunk_id = 'v0'",
            (vec,),
        ).fetchone()
    assert row is not None
    # pgvector >= 0.4 loads `Vector` objects (the read path takes either, `retrieval.units`)
    loaded = row[0].to_numpy() if hasattr(row[0], "to_numpy") else row[0]
    assert np.allclose(loaded, vec)
    assert row[1] == pytest.approx(0.0, abs=1e-6)


def test_pool_rolls_back_on_error(database: Database, clean_db: str) -> None:
    with pytest.raises(RuntimeError), database.connection() as conn:
        conn.execute(
            "INSERT INTO ctx.repair_runs (mode) VALUES ('full')",
        )
        raise RuntimeError("boom")
    with database.connection() as conn:
        assert conn.execute("SELECT count(*) FROM ctx.repair_runs").fetchone() == (0,)


def _backends(db: Database) -> set[int]:
    """Check out both connections of a 2-connection pool at once; run a query on each."""
    with db.connection() as a, db.connection() as b:
        assert a.execute("SELECT 1").fetchone() == b.execute("SELECT 1").fetchone() == (1,)
        return {a.info.backend_pid, b.info.backend_pid}


def test_pool_is_fork_safe(pg_url: str) -> None:
    db = Database(pg_url, min_size=2, max_size=2)
    try:
        before = _backends(db)
        pid = os.fork()
        if pid == 0:  # child: must build its own pool, never touch the parent's sockets
            code = 1
            try:
                code = 0 if not (_backends(db) & before) else 3
                db.close()
            finally:
                os._exit(code)
        _, status_code = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status_code) == 0
        assert _backends(db) == before  # the parent's connections survived the child
    finally:
        db.close()


def test_from_settings_and_wait_ready(settings: object, pg_url: str) -> None:
    db = Database.from_settings(settings)  # type: ignore[arg-type]
    try:
        with db.connection() as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("ctxpipe",)
    finally:
        db.close()
    wait_ready(pg_url, timeout=5)
    with pytest.raises(StorageError, match="not ready after"):
        wait_ready("postgresql://ctxpipe@127.0.0.1:1/ctxpipe", timeout=0.5)


# --------------------------------------------------------------------------- CLI


def test_cli_db_migrate_and_status(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import app

    monkeypatch.setenv("CTXPIPE_DATABASE_URL", pg_url)
    runner = CliRunner()
    result = runner.invoke(app, ["db", "migrate", "--json"])
    assert result.exit_code == 0, result.output
    assert '"applied": []' in result.stdout
    result = runner.invoke(app, ["db", "migrate"])
    assert result.exit_code == 0 and "up to date" in result.stdout
    result = runner.invoke(app, ["db", "status"])
    assert result.exit_code == 0 and "applied  001_init.sql" in result.stdout


def test_cli_db_migrate_unreachable_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxpipe.cli import app

    monkeypatch.setenv("CTXPIPE_DATABASE_URL", "postgresql://ctxpipe@127.0.0.1:1/ctxpipe")
    result = CliRunner().invoke(app, ["db", "migrate"])
    assert result.exit_code == 2
    assert "cannot connect to PostgreSQL" in result.output
    assert "Traceback" not in result.output
