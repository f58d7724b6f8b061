"""DevStack: `ctxpipe dev up | down | status` — the whole pipeline as local background processes.

Layout of `{var_dir}/dev/` (owned by the dev stack):

    pg/        embedded PostgreSQL data directory (+ server.log)
    redis/     redis.pid, redis.log
    run/       <name>.json: pid, start time, command line of each Celery process
    logs/      <name>.log: stdout+stderr of each Celery process (appended across runs)
    beat/      the beat schedule file

`up` is idempotent (running pieces are left alone and reported) and returns only when every
piece it started is ready: workers' current processes beat (a heartbeat key in Redis that a
busy solo pool cannot delay), beat has started its
scheduler, Flower and the HTTP API accept connections. `down` stops everything and leaves no
process behind.
"""

from __future__ import annotations

import fcntl
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ctxpipe.core.config import Settings
from ctxpipe.core.errors import StorageError
from ctxpipe.devstack.celery_procs import (
    BEAT_READY,
    ProcSpec,
    WorkerProbe,
    api_spec,
    beat_spec,
    flower_spec,
    worker_roles,
    worker_spec,
)
from ctxpipe.devstack.env import child_env, resolve
from ctxpipe.devstack.models import Component, StackStatus
from ctxpipe.devstack.procs import (
    ProcRecord,
    family,
    process_alive,
    spawn,
    stop_all,
    terminate,
)
from ctxpipe.devstack.servers import PostgresServer, RedisServer
from ctxpipe.devstack.supervisor import reset_restarts, restarts, supervisor_spec
from ctxpipe.storage.netutil import port_open, tail

# Progress callback: (component name, message).
Notify = Callable[[str, str], None]


def _quiet(_name: str, _msg: str) -> None:
    return None


class DevStack:
    def __init__(
        self,
        settings: Settings,
        *,
        concurrency: int = 2,
        hostname: str | None = None,
        probe: WorkerProbe | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.settings = resolve(settings)
        self.dev_dir = self.settings.var_dir / "dev"
        self.run_dir = self.dev_dir / "run"
        self.logs_dir = self.dev_dir / "logs"
        self.postgres = PostgresServer(self.settings, self.dev_dir / "pg")
        self.redis = RedisServer(self.settings, self.dev_dir / "redis")
        host = hostname or socket.gethostname()
        self.specs: list[ProcSpec] = [worker_spec(r, host) for r in worker_roles(concurrency)]
        self.specs.append(beat_spec(self.dev_dir / "beat" / "celerybeat-schedule"))
        self.specs.append(flower_spec(self.settings))
        self.specs.append(api_spec(self.settings))
        self.supervisor = supervisor_spec(concurrency)  # restarts what dies among `specs`
        self.env = child_env(self.settings)
        self._probe = probe

    # ------------------------------------------------------------------ helpers
    @property
    def probe(self) -> WorkerProbe:
        if self._probe is None:
            self._probe = self._heartbeat_probe
        return self._probe

    def _heartbeat_probe(self, nodes: list[str]) -> set[str]:
        """Workers whose *current* process beats (`ctxpipe.commit.recovery`): readiness that a
        busy solo pool cannot delay, and that a dead predecessor's heartbeat cannot fake."""
        import redis

        from ctxpipe.commit.recovery import WorkerRegistry

        pids = {
            s.node: rec.pid
            for s in self.specs
            if s.node in nodes and (rec := ProcRecord.load(self.run_dir, s.name)) is not None
        }
        client = redis.Redis.from_url(self.settings.redis_url, socket_timeout=2)
        try:
            alive = WorkerRegistry(client).alive()
        except redis.RedisError:
            return set()
        finally:
            client.close()
        return {n for n, pid in pids.items() if any(i.startswith(f"{n}|{pid}|") for i in alive)}

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One `up`/`down` at a time per var dir."""
        self.dev_dir.mkdir(parents=True, exist_ok=True)
        with open(self.dev_dir / ".lock", "w", encoding="ascii") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def record(self, name: str) -> ProcRecord | None:
        rec = ProcRecord.load(self.run_dir, name)
        return rec if rec is not None and rec.alive() else None

    def start_process(self, spec: ProcSpec) -> int:
        """Start one process of the stack (no waiting); returns its log's size before."""
        ProcRecord.remove(self.run_dir, spec.name)
        log = self.logs_dir / f"{spec.name}.log"
        offset = log.stat().st_size if log.exists() else 0
        spawn(
            spec.name,
            spec.argv,
            env={**self.env, **spec.env},
            cwd=self.dev_dir,
            log=log,
            run_dir=self.run_dir,
            port=spec.port,
            node=spec.node,
        )
        return offset

    def _proc_status(self, spec: ProcSpec) -> Component:
        rec = self.record(spec.name)
        endpoint = spec.node or ""
        if spec.kind in ("flower", "api"):
            endpoint = f"http://127.0.0.1:{spec.port}/"
        return Component(
            name=spec.name,
            kind=spec.kind,
            alive=rec is not None,
            pid=rec.pid if rec else None,
            pids=family(rec.pid) if rec else [],
            port=spec.port,
            endpoint=endpoint,
            detail=spec.detail,
            log=str(self.logs_dir / f"{spec.name}.log"),
            restarts=restarts(self.run_dir).get(spec.name, 0),
        )

    # ------------------------------------------------------------------ status
    def status(self) -> StackStatus:
        parts = [self.postgres.status(), self.redis.status()]
        parts += [self._proc_status(s) for s in [*self.specs, self.supervisor]]
        running = sum(c.alive for c in parts)
        return StackStatus(
            var_dir=str(self.settings.var_dir),
            dev_dir=str(self.dev_dir),
            alive=running == len(parts),
            running=running,
            components=parts,
        )

    # ------------------------------------------------------------------ up
    def up(self, timeout: float = 120.0, notify: Notify = _quiet) -> StackStatus:
        actions: dict[str, str] = {}
        with self.locked():
            self._preflight()
            for server in (self.postgres, self.redis):
                notify(server.name, "starting")
                actions[server.name] = server.start()
            (self.dev_dir / "beat").mkdir(parents=True, exist_ok=True)
            started: dict[str, tuple[ProcSpec, int]] = {}
            for spec in self.specs:
                running = self.record(spec.name)
                if running is not None:
                    actions[spec.name] = "already running"
                    if running.argv != spec.argv:
                        actions[spec.name] += " (other options: `dev down` + `up` applies them)"
                    continue
                offset = self.start_process(spec)
                notify(spec.name, "started, waiting until ready")
                started[spec.name] = (spec, offset)
                actions[spec.name] = "started"
            self._wait_ready(started, timeout, notify)
            if self.record(self.supervisor.name) is None:
                self.start_process(self.supervisor)
                actions[self.supervisor.name] = "started"
            else:
                actions[self.supervisor.name] = "already running"
        status = self.status()
        for c in status.components:
            c.action = actions.get(c.name, "")
            if c.name == "postgres":
                n = len(self.postgres.applied)
                c.detail += f", {n} migration(s) applied" if n else ", schema up to date"
        return status

    def _preflight(self) -> None:
        """Fail before starting anything when a binary is missing or a port is taken."""
        self.postgres.preflight()
        self.redis.preflight()
        for spec in self.specs:
            if spec.port is not None and self.record(spec.name) is None:
                if port_open("127.0.0.1", spec.port):
                    raise StorageError(
                        f"cannot start {spec.name}: port {spec.port} on 127.0.0.1 is in use "
                        f"(set CTXPIPE_{spec.name.upper()}_PORT to another port)"
                    )

    def _ready(self, spec: ProcSpec, offset: int) -> bool:
        if spec.kind in ("flower", "api"):  # uvicorn binds once the app has started
            return spec.port is not None and port_open("127.0.0.1", spec.port)
        if spec.kind == "beat":
            log = self.logs_dir / f"{spec.name}.log"
            try:
                with open(log, encoding="utf-8", errors="replace") as fh:
                    fh.seek(offset)
                    return BEAT_READY in fh.read()
            except OSError:
                return False
        return True  # workers: checked together through the broker

    def _wait_ready(
        self, started: dict[str, tuple[ProcSpec, int]], timeout: float, notify: Notify
    ) -> None:
        pending = dict(started)
        deadline = time.monotonic() + timeout
        while pending:
            for name in list(pending):
                rec = ProcRecord.load(self.run_dir, name)
                if rec is None or not rec.alive():
                    log = self.logs_dir / f"{name}.log"
                    last = " | ".join(tail(log, 4).splitlines())
                    raise StorageError(
                        f"{name} exited while starting (log {log}): {last} "
                        "— `ctxpipe dev down` stops the rest"
                    )
            for name, (spec, offset) in list(pending.items()):
                if spec.kind != "worker" and self._ready(spec, offset):
                    del pending[name]
                    notify(name, "ready")
            nodes = {spec.node: name for name, (spec, _) in pending.items() if spec.node}
            if nodes:
                for node in self.probe(list(nodes)):
                    del pending[nodes[node]]
                    notify(nodes[node], "ready")
            if not pending:
                return
            if time.monotonic() >= deadline:
                names = ", ".join(sorted(pending))
                raise StorageError(
                    f"not ready after {timeout:.0f}s: {names} (logs in {self.logs_dir}) "
                    "— `ctxpipe dev down` stops the rest"
                )
            time.sleep(0.2)

    # ------------------------------------------------------------------ down
    def down(self, timeout: float = 15.0, notify: Notify = _quiet) -> StackStatus:
        """Stop the Celery processes (SIGTERM to each process group, SIGKILL after `timeout`),
        then Redis and PostgreSQL. Every piece is attempted even if one fails; raises
        OSError/StorageError afterwards if anything could not be stopped or survives."""
        actions: dict[str, str] = {}
        errors: list[str] = []
        with self.locked():
            before = self.status()
            sup = ProcRecord.load(self.run_dir, self.supervisor.name)
            try:  # first, or it would start again what is being stopped; alone: the
                # processes it restarted are its children and are stopped with the others
                if sup is not None and terminate(sup, timeout):
                    actions[self.supervisor.name] = "stopped"
            except OSError as exc:
                errors.append(str(exc))
            ProcRecord.remove(self.run_dir, self.supervisor.name)
            records = [ProcRecord.load(self.run_dir, s.name) for s in self.specs]
            live = [r for r in records if r is not None]
            notify("celery", f"stopping {sum(r.alive() for r in live)} process(es)")
            try:
                for name in stop_all(live, timeout):
                    actions[name] = "stopped"
            except OSError as exc:
                errors.append(str(exc))
            for spec in self.specs:
                ProcRecord.remove(self.run_dir, spec.name)
            reset_restarts(self.run_dir)
            for server in (self.redis, self.postgres):
                if not server.managed:
                    actions[server.name] = "external (left running)"
                    continue
                notify(server.name, "stopping")
                try:
                    if server.stop():
                        actions[server.name] = "stopped"
                except (StorageError, OSError) as exc:
                    errors.append(f"{server.name}: {exc}")
            survivors = [
                p for c in before.components if c.managed for p in c.pids if process_alive(p)
            ]
            if survivors:
                errors.append(f"processes still alive after `dev down`: {sorted(survivors)}")
            if errors:
                raise OSError("; ".join(errors))
        status = self.status()
        for c in status.components:
            c.action = actions.get(c.name, "not running")
        return status


def dev_dir(settings: Settings) -> Path:
    return resolve(settings).var_dir / "dev"


__all__ = ["DevStack", "Notify", "dev_dir"]
