"""Import: records written through the FS's write path, the replica following by the outbox.

An import reads its source twice. The first pass checks every record (format version, model,
URIs, the account it is allowed to write, a URI given twice) and, if any is bad, raises
`ImportFileError` naming each bad line: nothing is written. The second pass writes each node
with `ContextFS.restore_files` (one atomic commit per node under its node lock, holding its
owner lock as a commit's write phase does), records session owners with `SessionOwners.claim`,
and appends an UPSERT event per node (and per node with relations) to the outbox, as a
commit's register phase does; the index worker then indexes the nodes.

Idempotent: a node that already holds the record's bytes is left alone and its events have
deterministic ids (already queued: not queued again), so importing a file twice changes
nothing the second time. A node that holds *other* bytes is a conflict: left as it is and
reported, unless `replace` (then the record wins, and its event lets the FS version win over
a newer replica row).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from pydantic import BaseModel, Field

from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.errors import Picklable, TenancyError
from ctxpipe.core.models import OutboxEvent, stable_id
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs import ContextFS, OwnerLock
from ctxpipe.fs.session_owner import SessionOwners
from ctxpipe.portability.records import (
    NodeRecord,
    RecordError,
    SessionRecord,
    node_files,
    parse_line,
)

Numbered = tuple[int, NodeRecord | SessionRecord | RecordError]
Source = Callable[[], Iterator[Numbered]]
"""Opens the import's source afresh and yields (line number, record), or the `RecordError`
of a bad line in its place."""

MAX_REPORTED = 20  # bad lines (and conflicts) named in full; the rest are counted
EVENT_BATCH = 200


class OutboxSink(Protocol):
    """Where the import's events go (`OutboxStore` is one)."""

    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]: ...


class ImportFileError(Picklable, ValueError):
    """The source has bad records; nothing was written."""

    def __init__(self, errors: list[RecordError], total: int) -> None:
        more = f" (and {total - len(errors)} more)" if total > len(errors) else ""
        super().__init__(
            f"{total} bad record(s), nothing imported: " + "; ".join(str(e) for e in errors) + more
        )
        self.errors = errors
        self.total = total


class ImportReport(BaseModel):
    records: int = 0
    written: int = 0
    unchanged: int = 0
    sessions: int = 0
    conflicts: int = 0
    conflict_uris: list[str] = Field(default_factory=list)
    events_queued: int = 0
    warnings: list[str] = Field(default_factory=list)


def owner_key(uri: CtxURI) -> str:
    """The owner-lock key a commit's write phase holds for `uri` (``acme/users/u1``)."""
    return f"{uri.account}/{uri.scope}/{uri.segments[0]}"


def check_source(source: Source, account: str | None = None) -> int:
    """Check every record (see the module); returns how many there are."""
    errors: list[RecordError] = []
    total = 0
    seen: set[bytes] = set()  # 8 bytes per URI, not the URI
    records = 0
    for number, record in source():
        if isinstance(record, RecordError):
            total += 1
            if len(errors) < MAX_REPORTED:
                errors.append(record)
            continue
        records += 1
        problem = ""
        u = CtxURI.parse(record.uri)
        digest = hashlib.blake2b(record.uri.encode(), digest_size=8).digest()
        if account is not None and u.account != account:
            problem = f"{record.uri} is not in account {account!r}"
        elif digest in seen:
            problem = f"{record.uri} is given twice"
        seen.add(digest)
        if problem:
            total += 1
            if len(errors) < MAX_REPORTED:
                errors.append(RecordError(number, problem))
    if total:
        raise ImportFileError(errors, total)
    return records


class Importer:
    def __init__(
        self,
        fs: ContextFS,
        lock: OwnerLock,
        outbox: OutboxSink | None,
        *,
        lock_timeout_s: float = 30.0,
        max_retries: int = 5,
        replace: bool = False,
    ) -> None:
        self.fs = fs
        self.lock = lock
        self.outbox = outbox
        self.timeout = lock_timeout_s
        self.max_retries = max_retries
        self.replace = replace
        self.owners = SessionOwners(fs)

    def run(
        self,
        source: Source,
        *,
        account: str | None = None,
        progress: Callable[[int, str], None] | None = None,
    ) -> ImportReport:
        """Check the whole source, then write it (see the module)."""
        check_source(source, account)
        report = ImportReport()
        if self.outbox is None:
            report.warnings.append(
                "no outbox: the index replica catches up with `ctxpipe repair --full`"
            )
        pending: list[OutboxEvent] = []
        for _number, record in source():
            if isinstance(record, RecordError):  # pragma: no cover - the check found none
                raise ImportFileError([record], 1)
            report.records += 1
            if isinstance(record, SessionRecord):
                self._session(record, report)
            else:
                pending += self._node(record, report)
            if len(pending) >= EVENT_BATCH:
                report.events_queued += self._flush(pending)
                pending = []
            if progress is not None:
                progress(report.records, record.uri)
        report.events_queued += self._flush(pending)
        return report

    # ------------------------------------------------------------------ one record
    def _conflict(self, report: ImportReport, uri: str) -> None:
        report.conflicts += 1
        if len(report.conflict_uris) < MAX_REPORTED:
            report.conflict_uris.append(uri)

    def _session(self, record: SessionRecord, report: ImportReport) -> None:
        u = CtxURI.parse(record.uri)
        before = self.owners.owner(u.account, record.session_id)
        if before is not None and before.recorded:
            if (before.user_id, before.agent_id) == (record.user_id, record.agent_id):
                report.unchanged += 1
            else:
                self._conflict(report, record.uri)
            return
        ctx = RequestContext(
            account_id=u.account,
            user_id=record.user_id,
            agent_id=record.agent_id,
            session_id=record.session_id,
        )
        try:
            self.owners.claim(ctx, self.lock, self.timeout)
        except TenancyError:  # the session's archives name another owner
            self._conflict(report, record.uri)
            return
        report.sessions += 1

    def _node(self, record: NodeRecord, report: ImportReport) -> list[OutboxEvent]:
        u = CtxURI.parse(record.uri)
        with self.lock.hold(owner_key(u), self.timeout):
            outcome = self.fs.restore_files(
                u, record.version, node_files(record), replace=self.replace
            )
        if outcome == "conflict":
            self._conflict(report, record.uri)
            return []
        if outcome == "written":
            report.written += 1
        else:
            report.unchanged += 1
        return self._events(record, replaced=outcome == "written" and self.replace)

    def _events(self, record: NodeRecord, *, replaced: bool) -> list[OutboxEvent]:
        """An UPSERT per node and per node with relations; ids deterministic in the record."""
        upsert = OutboxEventType.UPSERT_CONTEXT
        payload: dict[str, object] = {
            "version": record.version,
            "content_hash": record.content_hash,
            "source": "import",
        }
        if replaced:
            payload["replace"] = True  # the FS is the truth even when it went backwards
        disc = f"import:{record.version}:{record.content_hash}"
        events = [
            OutboxEvent(
                event_id=OutboxEvent.make_id(upsert, record.uri, disc),
                event_type=upsert,
                uri=record.uri,
                payload=payload,
                max_retries=self.max_retries,
            )
        ]
        if record.relations is not None:
            ids = sorted(e.id for e in record.relations.edges)
            relate = OutboxEventType.UPSERT_RELATION
            digest = stable_id(*ids, length=16)
            events.append(
                OutboxEvent(
                    event_id=OutboxEvent.make_id(relate, record.uri, f"import:{digest}"),
                    event_type=relate,
                    uri=record.uri,
                    payload={"edge_ids": ids, "source": "import"},
                    max_retries=self.max_retries,
                )
            )
        return events

    def _flush(self, events: list[OutboxEvent]) -> int:
        if not events or self.outbox is None:
            return 0
        return len(self.outbox.append_batch(events))


def read_lines(path: str, parse: Callable[[str, int], Iterable[Numbered]]) -> Source:
    """A `Source` over a UTF-8 text file: `parse` turns each non-blank line into its
    records (`parse_numbered` for an export)."""

    def open_source() -> Iterator[Numbered]:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield number, RecordError(number, f"not UTF-8: {exc.reason}")
                    continue
                if line.strip():
                    yield from parse(line, number)

    return open_source


def parse_numbered(line: str, number: int) -> Iterator[Numbered]:
    """One line of an export as (number, record or its error)."""
    try:
        yield number, parse_line(line, number)
    except RecordError as exc:
        yield number, exc


__all__ = [
    "ImportFileError",
    "ImportReport",
    "Importer",
    "Numbered",
    "OutboxSink",
    "Source",
    "check_source",
    "owner_key",
    "parse_numbered",
    "read_lines",
]
