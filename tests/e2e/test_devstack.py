"""`ctxpipe dev up | status | down`: the whole local stack as real background processes.

One stack per test module (temp var dir, free ports): up, status, Flower auth, idempotent up,
down — and afterwards no process of the stack is left alive.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import StorageError
from ctxpipe.devstack import DevStack
from ctxpipe.devstack.celery_procs import flower_spec, worker_roles, worker_spec
from ctxpipe.devstack.env import child_env, settings_env
from ctxpipe.storage.netutil import free_port, pid_alive, tail

COMPONENTS = {
    "postgres",
    "redis",
    "worker-commit",
    "worker-extract",
    "worker-embed",
    "worker-maintenance",
    "beat",
    "flower",
    "api",
    "supervisor",
}


SESSION = {
    "account_id": "acme",
    "user_id": "dana",
    "session_id": "s-devstack",
    "messages": [
        {
            "id": "m1",
            "role": "user",
            "content": "I'm Dana, a data engineer at Initech in Porto. I prefer short answers.",
        },
        {"id": "m2", "role": "assistant", "content": "Noted, Dana."},
    ],
}


def run_cli(env: dict[str, str], cwd: Path, *args: str, timeout: float = 120) -> Any:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "ctxpipe", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    proc.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return proc


def as_json(proc: subprocess.CompletedProcess[str], what: str) -> dict[str, Any]:
    assert proc.returncode == 0, f"`ctxpipe {what}` failed ({proc.returncode}): {proc.stderr}"
    return json.loads(proc.stdout)


def by_name(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in status["components"]}


def stack_processes(marker: str) -> list[int]:
    """Live processes whose command line, environment or working directory mentions `marker`
    (our temp dir). The cwd matters: redis-server rewrites its command line and environment."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        mentions = marker.encode() in cmdline or marker.encode() in environ or marker in cwd
        if mentions and pid_alive(int(entry)):
            found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def stack_dir() -> Iterator[Path]:
    # Not tmp_path: as root, the PostgreSQL account must traverse the path.
    root = Path(tempfile.mkdtemp(prefix="ctxpipe-test-devstack-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def dev_env(stack_dir: Path) -> Iterator[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPIPE_")}
    env.update(
        CTXPIPE_VAR_DIR="var",  # relative on purpose: must resolve against the CLI's cwd
        CTXPIPE_FS_ROOT="var/fs",
        CTXPIPE_DATABASE_URL=f"postgresql://ctxpipe@127.0.0.1:{free_port()}/ctxpipe",
        CTXPIPE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        CTXPIPE_FLOWER_PORT=str(free_port()),
        CTXPIPE_API_PORT=str(free_port()),
        CTXPIPE_FLOWER_USER="tester",
        CTXPIPE_FLOWER_PASSWORD=secrets.token_hex(8),
    )
    yield env
    # Shown by pytest only when a test failed: the tail of every component's log.
    dev = stack_dir / "var" / "dev"
    for log in [*sorted((dev / "logs").glob("*.log")), dev / "redis" / "redis.log"]:
        print(f"----- {log.name}\n{tail(log, 15)}")
    # Whatever happened in the test: stop the stack, then make sure nothing survives.
    down = run_cli(env, stack_dir, "dev", "down", "--timeout", "5")
    print(f"----- dev down: {down.returncode} {down.stderr}")
    for pid in stack_processes(str(stack_dir)):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_dev_up_status_flower_idempotent_down(stack_dir: Path, dev_env: dict[str, str]) -> None:
    # ---------------------------------------------------------------- up
    up = run_cli(dev_env, stack_dir, "dev", "up", "--json", "--timeout", "60")
    first = by_name(as_json(up, "dev up"))
    assert set(first) == COMPONENTS
    not_alive = sorted(n for n, c in first.items() if not c["alive"])
    assert not not_alive, f"not alive after `dev up`: {not_alive}\n{up.stderr}"
    assert {n: c["action"] for n, c in first.items()} == dict.fromkeys(COMPONENTS, "started")
    assert "migration(s) applied" in first["postgres"]["detail"]
    dev_dir = stack_dir / "var" / "dev"
    assert Path(first["flower"]["log"]).parent == dev_dir / "logs"
    print(f"dev up: {up.elapsed:.1f}s")

    # ---------------------------------------------------------------- status
    status = as_json(run_cli(dev_env, stack_dir, "dev", "status", "--json"), "dev status")
    assert status["alive"] is True and status["running"] == len(COMPONENTS)
    assert status["dev_dir"] == str(dev_dir)
    comps = by_name(status)
    for name in COMPONENTS:
        assert comps[name]["pid"] == first[name]["pid"], name
        assert comps[name]["pid"] in comps[name]["pids"], name
    assert len(comps["worker-commit"]["pids"]) == 3  # prefork master + 2 children
    assert len(comps["worker-embed"]["pids"]) == 1  # solo pool
    assert len(comps["postgres"]["pids"]) > 1  # postmaster + its processes
    all_pids = {p for c in comps.values() for p in c["pids"]}

    # every process got the same, resolved settings (absolute paths) and offline mode
    environ = Path(f"/proc/{comps['worker-commit']['pid']}/environ").read_bytes().split(b"\0")
    child = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
    assert child["CTXPIPE_VAR_DIR"] == str(stack_dir / "var")
    assert child["CTXPIPE_FS_ROOT"] == str(stack_dir / "var" / "fs")
    assert child["CTXPIPE_REDIS_URL"] == dev_env["CTXPIPE_REDIS_URL"]
    assert child["HF_HUB_OFFLINE"] == "1"
    argv = Path(f"/proc/{comps['flower']['pid']}/cmdline").read_bytes()
    assert dev_env["CTXPIPE_FLOWER_PASSWORD"].encode() not in argv, "password visible in ps"

    # migrations were applied to the embedded server
    with psycopg.connect(dev_env["CTXPIPE_DATABASE_URL"], connect_timeout=5) as conn:
        row = conn.execute("SELECT count(*) FROM ctx.schema_migrations").fetchone()
        assert row is not None and row[0] >= 1

    # ---------------------------------------------------------------- Flower basic auth
    url = f"http://127.0.0.1:{dev_env['CTXPIPE_FLOWER_PORT']}/"
    assert httpx.get(url, timeout=10).status_code == 401
    wrong = httpx.get(url, auth=("tester", "wrong"), timeout=10)
    assert wrong.status_code == 401
    auth = ("tester", dev_env["CTXPIPE_FLOWER_PASSWORD"])
    assert httpx.get(url, auth=auth, timeout=10).status_code == 200

    # ---------------------------------------------------------------- the HTTP API
    api = f"http://127.0.0.1:{dev_env['CTXPIPE_API_PORT']}"
    assert comps["api"]["endpoint"] == api + "/"
    ready = httpx.get(f"{api}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text

    # ---------------------------------------------------------------- demo through Celery
    session = stack_dir / "session.json"
    session.write_text(json.dumps(SESSION), encoding="utf-8")
    wide = {**dev_env, "COLUMNS": "250"}  # no wrapping in the captured Rich output
    demo = run_cli(wide, stack_dir, "demo", str(session), "--timeout", "90", timeout=150)
    assert demo.returncode == 0, f"`ctxpipe demo` failed: {demo.stdout}\n{demo.stderr}"
    assert "Traceback" not in demo.stderr, demo.stderr
    assert "success" in demo.stdout and "ctx://acme/users/dana/" in demo.stdout
    assert "outbox events" in demo.stdout and "ctxpipe dev down" in demo.stdout
    assert (stack_dir / "var" / "fs").is_dir(), "FS root did not resolve against the cwd"

    # ---------------------------------------------------------------- no credential logged
    # every log of the stack (workers, beat, Flower, Redis, PostgreSQL) and every CLI output
    # of this run, after a wrong and a right Flower login and a commit through the workers
    secret = dev_env["CTXPIPE_FLOWER_PASSWORD"].encode()
    logs = [
        p
        for p in dev_dir.rglob("*")
        if p.is_file() and (p.suffix == ".log" or "log" in p.parent.name)
    ]
    assert len(logs) >= len(COMPONENTS) - 1, logs
    leaked = [str(p) for p in logs if secret in p.read_bytes()]
    assert not leaked, f"the Flower password is in {leaked}"
    for proc in (up, demo):
        assert secret.decode() not in proc.stdout + proc.stderr

    # ---------------------------------------------------------------- up again: no-op
    again = run_cli(dev_env, stack_dir, "dev", "up", "--json", "--timeout", "60")
    second = by_name(as_json(again, "dev up (again)"))
    assert {n: c["action"] for n, c in second.items()} == dict.fromkeys(
        COMPONENTS, "already running"
    )
    assert {n: c["pid"] for n, c in second.items()} == {n: c["pid"] for n, c in first.items()}
    assert second["postgres"]["detail"].endswith("schema up to date")
    text_status = run_cli(dev_env, stack_dir, "dev", "status")
    running = f"{len(COMPONENTS)}/{len(COMPONENTS)} running"
    assert text_status.returncode == 0 and running in text_status.stdout

    # ---------------------------------------------------------------- supervisor
    # a whole worker node SIGKILLed (parent and pool children) comes back by itself
    killed = comps["worker-extract"]
    for pid in killed["pids"]:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    back: dict[str, Any] = {}
    while time.monotonic() < deadline:
        now = as_json(run_cli(dev_env, stack_dir, "dev", "status", "--json"), "dev status")
        back = by_name(now)["worker-extract"]
        if back["alive"] and back["pid"] != killed["pid"]:
            break
        time.sleep(0.5)
    assert back["alive"] and back["pid"] != killed["pid"], back
    assert back["restarts"] == 1
    all_pids |= set(back["pids"])

    # ---------------------------------------------------------------- down
    down = run_cli(dev_env, stack_dir, "dev", "down", "--json")
    stopped = by_name(as_json(down, "dev down"))
    assert all(not c["alive"] for c in stopped.values()), stopped
    assert {n: c["action"] for n, c in stopped.items()} == dict.fromkeys(COMPONENTS, "stopped")
    print(f"dev down: {down.elapsed:.1f}s")
    survivors = sorted(p for p in all_pids if pid_alive(p))
    assert not survivors, f"processes left behind by `dev down`: {survivors}"
    # the API went with the rest: its port is free for the next `dev up` (which, like any
    # server, reuses an address whose old connections linger in TIME_WAIT)
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", int(dev_env["CTXPIPE_API_PORT"])))
    leftovers = stack_processes(str(stack_dir))
    assert not leftovers, f"processes still using the stack dir: {leftovers}"
    after = as_json(run_cli(dev_env, stack_dir, "dev", "status", "--json"), "dev status")
    assert after["running"] == 0
    assert not list((dev_dir / "run").glob("*.json")), "stale pid records after down"
    # down is idempotent too
    assert run_cli(dev_env, stack_dir, "dev", "down").returncode == 0


def test_dev_up_without_redis_binary_fails_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPIPE_")}
    env.update(
        PATH=str(tmp_path),  # no redis-server on PATH
        CTXPIPE_VAR_DIR=str(tmp_path / "var"),
        CTXPIPE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        CTXPIPE_DATABASE_URL=f"postgresql://ctxpipe@127.0.0.1:{free_port()}/ctxpipe",
    )
    proc = run_cli(env, tmp_path, "dev", "up", timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "redis-server not found" in lines[0], proc.stderr
    assert "apt-get install redis-server" in lines[0]
    assert not (tmp_path / "var" / "dev" / "pg").exists(), "started PostgreSQL before failing"


@pytest.mark.parametrize("component", ["flower", "api"])
def test_dev_up_refuses_a_busy_port_in_one_line(tmp_path: Path, component: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPIPE_")}
        env.update(
            CTXPIPE_VAR_DIR=str(tmp_path / "var"),
            CTXPIPE_FLOWER_PORT=str(free_port()),
            CTXPIPE_API_PORT=str(free_port()),
            CTXPIPE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
            CTXPIPE_DATABASE_URL=f"postgresql://ctxpipe@127.0.0.1:{free_port()}/ctxpipe",
        )
        env[f"CTXPIPE_{component.upper()}_PORT"] = str(port)
        proc = run_cli(env, tmp_path, "dev", "up", timeout=60)
    assert proc.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in proc.stderr
    assert f"CTXPIPE_{component.upper()}_PORT" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "var" / "dev" / "pg").exists()


def test_up_that_never_gets_ready_fails_clearly_and_down_cleans_up(stack_dir: Path) -> None:
    """Workers that never answer the ping: `up` names them and where their logs are; `down`
    still stops everything that was started (used in-process here, as the API)."""
    base = stack_dir / "unready"
    stack = DevStack(
        Settings(
            var_dir=base,
            database_url=f"postgresql://ctxpipe@127.0.0.1:{free_port()}/ctxpipe",
            redis_url=f"redis://127.0.0.1:{free_port()}/0",
            flower_port=free_port(),
            api_port=free_port(),
        ),
        probe=lambda nodes: set(),  # no worker ever answers
    )
    try:
        with pytest.raises(StorageError) as err:
            stack.up(timeout=3)
        message = str(err.value)
        assert "not ready after 3s" in message and "worker-commit" in message
        assert str(base / "dev" / "logs") in message and "ctxpipe dev down" in message
        pids = {p for c in stack.status().components for p in c.pids}
        assert pids, "nothing was running after the failed up"
    finally:
        stack.down(timeout=5)
    assert stack.status().running == 0
    assert not [p for p in pids if pid_alive(p)]
    assert not stack_processes(str(base))


# ------------------------------------------------------------------ no servers needed


def test_child_env_round_trips_every_setting(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    original = Settings(
        var_dir=Path("var"), llm_api_key="sk-x", flower_password="pw", commit={"dry_run": True}
    )
    env = child_env(original, base={"CTXPIPE_STRAY": "1", "PATH": "/bin"})
    assert "CTXPIPE_STRAY" not in env and env["PATH"] == "/bin"
    assert env["HF_HUB_OFFLINE"] == "1"
    names = set(settings_env(original))
    assert "CTXPIPE_COMMIT__DRY_RUN" in names and "CTXPIPE_LLM_API_KEY" in names
    for key in [k for k in os.environ if k.startswith("CTXPIPE_")]:
        monkeypatch.delenv(key)
    for key, value in settings_env(original).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir("/")  # a worker's cwd differs: paths must still agree
    rebuilt = Settings()
    assert rebuilt.var_dir == tmp_path / "var" and rebuilt.fs_root == tmp_path / "var" / "fs"
    expected = original.model_copy(
        update={"var_dir": tmp_path / "var", "fs_root": tmp_path / "var" / "fs"}
    )
    assert rebuilt == expected


def test_worker_and_flower_command_lines() -> None:
    from tasks.queues import QUEUES

    roles = worker_roles(concurrency=3)
    assert [r.queue for r in roles] == list(QUEUES)
    specs = {r.role: worker_spec(r, "host") for r in roles}
    for role, spec in specs.items():
        assert spec.argv[:5] == [sys.executable, "-m", "celery", "-A", "tasks.app"]
        assert ["-Q", role] == spec.argv[6:8] and spec.node == f"{role}@host"
    assert "--pool=solo" in specs["embed"].argv
    assert "--pool=prefork" in specs["commit"].argv and "--concurrency=3" in specs["commit"].argv
    flower = flower_spec(Settings(flower_user="u", flower_password="s3cret", flower_port=5999))
    assert "--port=5999" in flower.argv and not any("s3cret" in a for a in flower.argv)
    assert flower.env["FLOWER_BASIC_AUTH"] == "u:s3cret"
    with pytest.raises(ValueError, match="basic auth"):
        flower_spec(Settings(flower_password=""))
