"""A node's files byte for byte: read for an export, written back exactly by an import.

`RESTORE_FILES` are what an export carries of a node (its `NODE_FILES` and its history). The
functions here run under the node's lock, which `ContextFS` takes: shared to read, exclusive
(after recovery) to restore.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from ctxpipe.fs.atomic import META_FILE, NODE_FILES, commit_files, fsync_dir
from ctxpipe.fs.history import HISTORY_FILE

RESTORE_FILES = (*NODE_FILES, HISTORY_FILE)  # what an export carries of a node
RestoreOutcome = Literal["written", "unchanged", "conflict"]


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def check_names(names: Iterable[str]) -> None:
    """`ValueError` for the first name that is not one of `RESTORE_FILES`."""
    if unknown := [n for n in names if n not in RESTORE_FILES]:
        raise ValueError(f"{unknown[0]!r} is not a node file")


def read_files(path: Path, names: Iterable[str]) -> dict[str, bytes | None]:
    """The files `names` of the node directory `path` (None for one it lacks)."""
    return {name: read_bytes(path / name) for name in names}


def check_restore(files: Mapping[str, bytes]) -> None:
    """`ValueError` unless `files` are node files, ``.meta.json`` among them."""
    check_names(files)
    if META_FILE not in files:
        raise ValueError(f"a restored node needs its {META_FILE}")


def restore_locked(
    path: Path, version: int, files: Mapping[str, bytes], *, replace: bool
) -> RestoreOutcome:
    """Make the node directory `path` hold exactly `files`, in one atomic commit (a file left
    out of `files` is removed): ``unchanged`` when it already does, ``conflict`` when it holds
    another node and not `replace` (nothing written), else ``written``. The caller holds the
    node's exclusive lock and has recovered it."""
    current = read_files(path, RESTORE_FILES)
    if current == {name: files.get(name) for name in RESTORE_FILES}:
        return "unchanged"
    if current[META_FILE] is not None and not replace:
        return "conflict"
    commit_files(path, version, files)
    for name in RESTORE_FILES:
        if name not in files and current[name] is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path / name)
    with contextlib.suppress(OSError):
        fsync_dir(path.parent)
    return "written"
