"""Import: through the FS write path with outbox events, checked first (a bad line and
nothing is written), idempotent, and careful with nodes that differ."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from outbox_twin import MemoryOutbox
from portability_world import ANN, NODES, populate, tree_bytes

from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.models import ContextNode
from ctxpipe.fs import ContextFS, LocalOwnerLock
from ctxpipe.portability import (
    Importer,
    ImportFileError,
    Selection,
    parse_numbered,
    read_lines,
    write_export,
)

BISCUIT = f"{ANN}/entities/biscuit"


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    src = populate(ContextFS(tmp_path / "src"))
    path = tmp_path / "export.jsonl"
    with open(path, "w") as f:
        write_export(src, Selection(), f)
    return path


def importer(root: Path, outbox: MemoryOutbox | None = None, replace: bool = False) -> Importer:
    return Importer(ContextFS(root), LocalOwnerLock(root), outbox, replace=replace)


def run(imp: Importer, path: Path, account: str | None = None):  # type: ignore[no-untyped-def]
    return imp.run(read_lines(str(path), parse_numbered), account=account)


def test_a_fresh_fs_gets_every_node_byte_for_byte(dump: Path, tmp_path: Path) -> None:
    outbox = MemoryOutbox()
    report = run(importer(tmp_path / "dst", outbox), dump)
    assert (report.written, report.sessions, report.conflicts) == (len(NODES), 2, 0)
    assert tree_bytes(tmp_path / "dst") == tree_bytes(tmp_path / "src")
    upserts = [e for e in outbox.events.values() if e.event_type is OutboxEventType.UPSERT_CONTEXT]
    relations = [
        e for e in outbox.events.values() if e.event_type is OutboxEventType.UPSERT_RELATION
    ]
    assert sorted(e.uri for e in upserts) == sorted(NODES)
    assert [e.uri for e in relations] == [BISCUIT]
    assert len(relations[0].payload["edge_ids"]) == 2
    assert report.events_queued == len(NODES) + 1
    dst = ContextFS(tmp_path / "dst")
    assert dst.read_node(BISCUIT).version == 2 and len(dst.history(BISCUIT)) == 2
    again = io.StringIO()
    write_export(dst, Selection(), again)
    assert again.getvalue() == dump.read_text()


def test_importing_twice_changes_nothing(dump: Path, tmp_path: Path) -> None:
    outbox = MemoryOutbox()
    run(importer(tmp_path / "dst", outbox), dump)
    before = tree_bytes(tmp_path / "dst")
    meta = tmp_path / "dst" / "acme/users/ann/memories/entities/biscuit/.meta.json"
    stamp = os.stat(meta).st_mtime_ns
    events = dict(outbox.events)
    report = run(importer(tmp_path / "dst", outbox), dump)
    assert (report.written, report.sessions, report.conflicts) == (0, 0, 0)
    assert report.unchanged == report.records == len(NODES) + 2
    assert report.events_queued == 0 and outbox.events == events
    assert tree_bytes(tmp_path / "dst") == before and os.stat(meta).st_mtime_ns == stamp


def test_an_interrupted_import_is_finished_by_running_it_again(dump: Path, tmp_path: Path) -> None:
    lines = dump.read_text().splitlines(keepends=True)
    half = tmp_path / "half.jsonl"
    half.write_text("".join(lines[:4]))
    run(importer(tmp_path / "dst"), half)  # and no outbox: its events never got out
    outbox = MemoryOutbox()
    report = run(importer(tmp_path / "dst", outbox), dump)
    assert report.unchanged == 4 and report.conflicts == 0
    assert sorted(
        e.uri for e in outbox.events.values() if e.event_type is OutboxEventType.UPSERT_CONTEXT
    ) == sorted(NODES)  # the events of the nodes already written are queued too
    assert tree_bytes(tmp_path / "dst") == tree_bytes(tmp_path / "src")


def test_a_node_that_differs_is_a_conflict_unless_replace(dump: Path, tmp_path: Path) -> None:
    dst = ContextFS(tmp_path / "dst")
    dst.write_node(ContextNode(uri=BISCUIT, category="entities", abstract="Something else."))
    mine = tree_bytes(tmp_path / "dst")
    report = run(importer(tmp_path / "dst"), dump)
    assert report.conflicts == 1 and report.conflict_uris == [BISCUIT]
    assert report.written == len(NODES) - 1
    after = tree_bytes(tmp_path / "dst")
    assert {k: v for k, v in after.items() if "biscuit" in k} == mine  # left as it was
    outbox = MemoryOutbox()
    report = run(importer(tmp_path / "dst", outbox, replace=True), dump)
    assert (report.written, report.conflicts) == (1, 0)
    assert tree_bytes(tmp_path / "dst") == tree_bytes(tmp_path / "src")
    replaced = [e for e in outbox.events.values() if e.uri == BISCUIT and e.payload.get("replace")]
    assert len(replaced) == 1


def test_a_session_owned_by_someone_else_is_a_conflict(dump: Path, tmp_path: Path) -> None:
    other = tmp_path / "dst" / "acme" / "sessions" / "s1"
    other.mkdir(parents=True)
    (other / ".owner.json").write_text('{"user_id":"eve","agent_id":"bot"}')
    report = run(importer(tmp_path / "dst"), dump)
    assert report.conflict_uris == ["ctx://acme/sessions/s1/"]
    assert (other / ".owner.json").read_text() == '{"user_id":"eve","agent_id":"bot"}'


def test_one_bad_line_and_nothing_is_written(dump: Path, tmp_path: Path) -> None:
    lines = dump.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(lines[:2]) + '{"format": 9}\n' + "".join(lines[2:]) + "oops\n")
    with pytest.raises(ImportFileError) as err:
        run(importer(tmp_path / "dst"), bad)
    assert [e.line for e in err.value.errors] == [3, len(lines) + 2]
    assert "line 3: format 9 is not 1" in str(err.value)
    assert tree_bytes(tmp_path / "dst") == {}


def test_a_uri_given_twice_and_another_account_are_refused(dump: Path, tmp_path: Path) -> None:
    lines = dump.read_text().splitlines(keepends=True)
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join(lines) + lines[0])
    with pytest.raises(ImportFileError, match=f"line {len(lines) + 1}: .* is given twice"):
        run(importer(tmp_path / "dst"), twice)
    with pytest.raises(ImportFileError, match="is not in account 'acme'") as err:
        run(importer(tmp_path / "dst"), dump, account="acme")
    assert err.value.total == 1  # the globex node
    assert tree_bytes(tmp_path / "dst") == {}


def test_bytes_that_are_not_utf8_are_a_bad_line(dump: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(dump.read_bytes() + b'{"format": 1, "uri": "\xff"}\n')
    with pytest.raises(ImportFileError, match="not UTF-8"):
        run(importer(tmp_path / "dst"), bad)
