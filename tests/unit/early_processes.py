"""Fresh interpreters that unit tests wait for, started as soon as collection ends.

A fresh interpreter costs about a second of imports, and some tests need several (one per
string-hash seed, or a `sys.modules` untouched by the test run). A test module declares them
at import, ``PROCESSES = EarlyProcesses(__name__, {key: Command(argv, env)})``; the unit
tier's conftest starts every declared set whose module has a selected test when collection
ends, so they run beside the rest of the tier, and the test takes what they printed with
``PROCESSES.outputs()`` (which starts them itself if nothing did). Their output goes to
temporary files: a child never blocks on a full pipe while nobody reads it yet."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ClassVar


@dataclass(frozen=True)
class Command:
    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: Path | None = None


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]


@dataclass
class EarlyProcesses:
    module: str
    commands: Mapping[str, Command]
    _running: dict[str, _Running] = field(default_factory=dict)
    _finished: dict[str, Finished] | None = None
    declared: ClassVar[list[EarlyProcesses]] = []

    def __post_init__(self) -> None:
        EarlyProcesses.declared.append(self)

    def start(self) -> None:
        if self._running or self._finished is not None:
            return
        for key, cmd in self.commands.items():
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            proc = subprocess.Popen(
                list(cmd.argv),
                env=None if cmd.env is None else dict(cmd.env),
                cwd=cmd.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
            self._running[key] = _Running(proc, out, err)

    def outputs(self, timeout: float = 120) -> dict[str, Finished]:
        """Each command's exit status and output, waiting for the ones still running."""
        if self._finished is None:
            self.start()
            try:
                done = {key: self._wait(run, timeout) for key, run in self._running.items()}
            finally:
                self.stop()
            self._finished = done
        return dict(self._finished)

    @staticmethod
    def _wait(run: _Running, timeout: float) -> Finished:
        returncode = run.proc.wait(timeout=timeout)
        texts = []
        for f in (run.stdout, run.stderr):
            f.seek(0)
            texts.append(f.read().decode("utf-8", errors="replace"))
        return Finished(returncode, texts[0], texts[1])

    def stop(self) -> None:
        """Kill what still runs (a test that never came) and drop the output files."""
        for run in self._running.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()
            run.stdout.close()
            run.stderr.close()
        self._running.clear()
