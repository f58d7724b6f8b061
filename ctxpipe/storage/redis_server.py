"""A local, throw-away `redis-server` (no persistence) for tests and `ctxpipe dev up`.

The server runs in the foreground of its own session (`--daemonize no`, `start_new_session`),
so it survives the launching process; its pid file and log live in `state_dir`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from ctxpipe.core.errors import StorageError
from ctxpipe.storage.netutil import pid_alive, port_open, tail, wait_until

PID_NAME = "redis.pid"
LOG_NAME = "redis.log"
INSTALL_HINT = "apt-get install redis-server"

# Children started by this process, so stop_redis() can reap them (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def redis_binary() -> str:
    """Path of `redis-server`, or a one-line StorageError with an install hint."""
    path = shutil.which("redis-server")
    if path is None:
        raise StorageError(
            f"redis-server not found on PATH: install it ({INSTALL_HINT}) "
            "or set CTXPIPE_REDIS_URL to a running Redis"
        )
    return path


def redis_url(port: int, *, host: str = "127.0.0.1", db: int = 0) -> str:
    return f"redis://{host}:{port}/{db}"


def ping(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if a Redis server answers PING on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def running_pid(state_dir: Path | str) -> int | None:
    """Pid of the redis-server started from `state_dir` if it is still alive."""
    try:
        pid = int((Path(state_dir) / PID_NAME).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) and _looks_like_redis(pid) else None


def _looks_like_redis(pid: int) -> bool:
    """Guard against a stale pid file whose pid was reused (best effort: needs /proc)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"redis" in cmdline


def start_redis(
    state_dir: Path | str,
    port: int,
    *,
    host: str = "127.0.0.1",
    timeout: float = 15.0,
    persist: bool = False,
) -> str:
    """Start redis-server on host:port (idempotent for the same `state_dir`); return its URL.

    `persist`: keep an append-only file in `state_dir` (fsync once a second), so a restart
    replays every queued message; otherwise nothing is kept on disk (tests, benchmarks)."""
    state = Path(state_dir).absolute()
    state.mkdir(parents=True, exist_ok=True)
    pid = running_pid(state)
    if pid is not None:
        if ping(host, port):
            return redis_url(port, host=host)
        raise StorageError(
            f"redis-server from {state} is running (pid {pid}) but not on {host}:{port}; "
            "stop it first"
        )
    binary = redis_binary()
    if port_open(host, port):
        raise StorageError(f"cannot start redis-server: port {port} on {host} is in use")
    logfile = state / LOG_NAME
    args = [
        binary,
        "--port", str(port),
        "--bind", host,
        "--save", "",
        "--appendonly", "yes" if persist else "no",
        "--appendfsync", "everysec",
        "--daemonize", "no",
        "--dir", str(state),
        "--logfile", str(logfile),
    ]  # fmt: skip
    with open(logfile, "ab") as log_fh:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=log_fh,
            cwd=state,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    (state / PID_NAME).write_text(f"{proc.pid}\n", encoding="ascii")
    if not wait_until(lambda: proc.poll() is not None or ping(host, port), timeout):
        _terminate(proc.pid, 5.0)
        raise StorageError(f"redis-server did not answer on {host}:{port} within {timeout:.0f}s")
    if proc.poll() is not None:
        _CHILDREN.pop(proc.pid, None)
        (state / PID_NAME).unlink(missing_ok=True)
        last = " | ".join(tail(logfile, 3).splitlines())
        raise StorageError(f"redis-server exited with status {proc.returncode}: {last}")
    return redis_url(port, host=host)


def _terminate(pid: int, timeout: float) -> None:
    child = _CHILDREN.pop(pid, None)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        if child is not None:
            try:
                child.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        if wait_until(lambda: not pid_alive(pid), timeout):
            break


def stop_redis(state_dir: Path | str, *, timeout: float = 10.0) -> bool:
    """Stop the redis-server started from `state_dir`. True if it was running."""
    state = Path(state_dir).absolute()
    pid = running_pid(state)
    (state / PID_NAME).unlink(missing_ok=True)
    if pid is None:
        return False
    _terminate(pid, timeout)
    return True


__all__ = ["ping", "redis_binary", "redis_url", "running_pid", "start_redis", "stop_redis"]
