"""Background processes of the dev stack: spawn detached, record, find, and stop as a group.

Every process is started in its own session (`start_new_session`), so its process group id is
its pid and a prefork pool's children share it: stopping = SIGTERM to the group, then SIGKILL
after a timeout. A record file (`run/<name>.json`) keeps the pid and the kernel start time, so a
stale record whose pid was reused by an unrelated process is never mistaken for ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ctxpipe.storage.netutil import pid_alive, wait_until

# Popen handles of the processes this interpreter started, so stopping them can reap them
# (otherwise they linger as zombies until this process exits).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass
class ProcRecord:
    """What `run/<name>.json` holds about one background process."""

    name: str
    pid: int
    argv: list[str]
    log: str
    start_time: int | None = None  # /proc/<pid>/stat field 22 (clock ticks since boot)
    started_at: float = field(default_factory=time.time)
    port: int | None = None
    node: str | None = None

    def save(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        tmp = run_dir / f".{self.name}.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")
        tmp.replace(run_dir / f"{self.name}.json")

    @classmethod
    def load(cls, run_dir: Path, name: str) -> ProcRecord | None:
        try:
            data = json.loads((run_dir / f"{name}.json").read_text(encoding="utf-8"))
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None

    @staticmethod
    def remove(run_dir: Path, name: str) -> None:
        (run_dir / f"{name}.json").unlink(missing_ok=True)

    def alive(self) -> bool:
        return process_alive(self.pid, self.start_time)


# --------------------------------------------------------------------------- /proc helpers


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 = state), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def process_alive(pid: int, started: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when known, started at `started`."""
    _reap(pid)
    if not pid_alive(pid):
        return False
    if started is None:
        return True
    now = start_time(pid)
    return now is None or now == started


def _proc_table() -> dict[int, tuple[int, int]] | None:
    """pid -> (ppid, pgid) of every live (non-zombie) process, or None without /proc."""
    if not os.path.isdir("/proc/self"):
        return None
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields and len(fields) > 3 and fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[2]))
    return table


def family(pid: int) -> list[int]:
    """`pid`, its descendants and the other members of its process group (all alive)."""
    table = _proc_table()
    if table is None:
        return [pid] if pid_alive(pid) else []
    if pid not in table:
        return []
    pgid = table[pid][1]
    members = {pid} | {p for p, (_, g) in table.items() if g == pgid and pgid == pid}
    changed = True
    while changed:  # add descendants (a child may have changed its group)
        new = {p for p, (pp, _) in table.items() if pp in members} - members
        members |= new
        changed = bool(new)
    return sorted(members)


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)


# --------------------------------------------------------------------------- spawn / stop


def spawn(
    name: str,
    argv: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    log: Path,
    run_dir: Path,
    port: int | None = None,
    node: str | None = None,
) -> ProcRecord:
    """Start `argv` detached (own session), stdout+stderr appended to `log`; record it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        fh.write(f"\n===== ctxpipe dev: starting {name} at {stamp} =====\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,  # own process group; Ctrl-C in the terminal won't hit it
            close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    record = ProcRecord(
        name=name,
        pid=proc.pid,
        argv=argv,
        log=str(log),
        start_time=start_time(proc.pid),
        port=port,
        node=node,
    )
    record.save(run_dir)
    return record


def _signal_family(pid: int, members: Iterable[int], sig: signal.Signals) -> None:
    # The group only when `pid` leads its own group (we started it with a new session):
    # never signal the group of the calling process.
    try:
        if os.getpgid(pid) == pid and pid != os.getpgrp():
            os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for member in members:
        try:
            os.kill(member, sig)
        except (ProcessLookupError, PermissionError):
            pass


def terminate(rec: ProcRecord, timeout: float = 15.0) -> bool:
    """SIGTERM one process (not its family), SIGKILL after `timeout`; True if it was running."""
    if not rec.alive():
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(rec.pid, signal.SIGTERM)
    if not wait_until(lambda: not rec.alive(), timeout, interval=0.1):
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGKILL)
        if not wait_until(lambda: not rec.alive(), 10.0, interval=0.1):
            raise OSError(f"process {rec.pid} ({rec.name}) survived SIGKILL")
    child = _CHILDREN.pop(rec.pid, None)
    if child is not None:
        child.wait(5)
    return True


def stop_all(records: Iterable[ProcRecord], timeout: float = 15.0) -> list[str]:
    """SIGTERM every live record's process family at once, wait, SIGKILL what is left.

    Returns the names that were running. Afterwards no member of any family is alive
    (or an OSError names the survivors).
    """
    targets: dict[str, tuple[int, set[int]]] = {}
    for rec in records:
        if rec.alive():
            targets[rec.name] = (rec.pid, set(family(rec.pid)))
    for pid, members in targets.values():
        _signal_family(pid, members, signal.SIGTERM)

    def remaining() -> set[int]:
        left: set[int] = set()
        for pid, members in targets.values():
            alive = {m for m in members | set(family(pid)) if process_alive(m)}
            members |= alive
            left |= alive
        return left

    if not wait_until(lambda: not remaining(), timeout, interval=0.1):
        for pid, members in targets.values():
            _signal_family(pid, members, signal.SIGKILL)
        if not wait_until(lambda: not remaining(), 10.0, interval=0.1):
            raise OSError(f"processes survived SIGKILL: {sorted(remaining())}")
    for pid, _ in targets.values():
        child = _CHILDREN.pop(pid, None)
        if child is not None:
            child.wait(5)
    return list(targets)


__all__ = ["ProcRecord", "family", "process_alive", "spawn", "start_time", "stop_all"]
