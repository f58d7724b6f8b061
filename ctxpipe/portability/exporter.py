"""Export: the records of a selection, streamed in stable order (one node in memory at a time).

`export_records` yields them; `write_export` writes them as JSONL and calls `progress` after
each. An export resumes after the last record it wrote: `after` is that record's URI, which
`last_uri` reads back from the end of an export file (a cut-off last line is dropped first).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ValidationError

from ctxpipe.core.errors import NodeNotFoundError, StorageError
from ctxpipe.fs import ContextFS
from ctxpipe.fs.context_fs import RESTORE_FILES
from ctxpipe.fs.session_owner import SessionOwners
from ctxpipe.portability.records import (
    NodeRecord,
    RecordError,
    SessionRecord,
    dump_line,
    parse_line,
    record_of,
)
from ctxpipe.portability.selection import Selection, key_of, walk

Progress = Callable[[int, str], None]
"""Called after each record written: how many so far, and the record's URI (the cursor)."""


class ExportReport(BaseModel):
    selection: str
    nodes: int = 0
    sessions: int = 0
    last_uri: str | None = None  # resume with `after=last_uri`


def export_records(
    fs: ContextFS, selection: Selection, after: str | None = None
) -> Iterator[NodeRecord | SessionRecord]:
    """The selection's records in stable order, those after the record `after` only."""
    owners = SessionOwners(fs)
    for entry in walk(fs, selection, key_of(after) if after else None):
        if entry.is_session:
            owner = owners.owner(entry.uri.account, entry.uri.segments[0])
            if owner is not None and owner.recorded:
                yield SessionRecord(
                    uri=str(entry.uri), user_id=owner.user_id, agent_id=owner.agent_id
                )
        if entry.is_node:
            try:
                files = fs.read_files(entry.uri, RESTORE_FILES)
            except NodeNotFoundError:
                continue  # removed while the export ran
            try:
                yield record_of(files)
            except (ValidationError, ValueError) as exc:
                raise StorageError(f"cannot export {entry.uri.node}: {exc}") from exc


def write_export(
    fs: ContextFS,
    selection: Selection,
    out: IO[str],
    *,
    after: str | None = None,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the selection's records to `out`, one line each, flushed as they go."""
    report = ExportReport(selection=selection.describe(), last_uri=after)
    for record in export_records(fs, selection, after):
        out.write(dump_line(record))
        out.flush()
        if isinstance(record, NodeRecord):
            report.nodes += 1
        else:
            report.sessions += 1
        report.last_uri = record.uri
        if progress is not None:
            progress(report.nodes + report.sessions, record.uri)
    return report


def last_uri(path: Path) -> str | None:
    """The URI of the last complete record of an export file (None when it has none); a
    cut-off last line (an export killed mid-write) is removed from the file."""
    with open(path, "rb+") as f:
        end = f.seek(0, os.SEEK_END)
        if end == 0:
            return None
        f.seek(end - 1)
        if f.read(1) != b"\n":  # cut off: drop the partial line
            start = _line_start(f, end)
            f.truncate(start)
            end = start
        if end == 0:
            return None
        start = _line_start(f, end - 1)
        f.seek(start)
        line = f.read(end - start)
    try:
        return parse_line(line, 0).uri
    except RecordError as exc:
        raise ValueError(
            f"the last line of {path} is not an export record: {exc.message}"
        ) from None


def _line_start(f: IO[bytes], end: int, block: int = 1 << 16) -> int:
    """Offset of the first byte after the last newline before `end` (0 when none)."""
    pos = end
    while pos > 0:
        size = min(block, pos)
        f.seek(pos - size)
        chunk = f.read(size)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return pos - size + i + 1
        pos -= size
    return 0


__all__ = ["ExportReport", "Progress", "export_records", "last_uri", "write_export"]
