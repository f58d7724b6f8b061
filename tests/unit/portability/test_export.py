"""Export: stable order, tenancy of a selection, streaming, and resuming where it stopped."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from portability_world import NODES

from ctxpipe.fs import ContextFS
from ctxpipe.portability import Selection, export_records, last_uri, write_export
from ctxpipe.portability.records import parse_line


def export(fs: ContextFS, selection: Selection = Selection(), after: str | None = None) -> str:
    out = io.StringIO()
    write_export(fs, selection, out, after=after)
    return out.getvalue()


def uris(text: str) -> list[str]:
    return [json.loads(line)["uri"] for line in text.splitlines()]


def test_everything_in_a_stable_order(populated: ContextFS) -> None:
    text = export(populated)
    records = [parse_line(line, n) for n, line in enumerate(text.splitlines(), 1)]
    keys = [r.key() for r in records]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert sorted(r.uri for r in records if r.kind == "node") == sorted(NODES)
    sessions = [r.uri for r in records if r.kind == "session"]
    assert sessions == ["ctx://acme/sessions/s1/", "ctx://acme/sessions/s2/"]
    assert export(populated) == text  # the same FS, the same bytes


@pytest.mark.parametrize(
    ("selection", "wanted"),
    [
        (
            Selection(account="acme", user="ann"),
            [
                "ctx://acme/sessions/s1/",
                "ctx://acme/sessions/s1/archives/1",
                "ctx://acme/users/ann/memories/entities/biscuit",
                "ctx://acme/users/ann/memories/entities/lisbon",
                "ctx://acme/users/ann/memories/preferences/ramen",
            ],
        ),
        (
            Selection(account="acme", user="bob"),
            [
                "ctx://acme/sessions/s2/",
                "ctx://acme/sessions/s2/archives/1",
                "ctx://acme/users/bob/memories/profile",
            ],
        ),
        (Selection(account="acme", agent="bot"), ["ctx://acme/agents/bot/memories/patterns/retry"]),
        (Selection(account="globex"), ["ctx://globex/users/ann/memories/profile"]),
        (Selection(account="nobody"), []),
    ],
)
def test_an_owner_or_account_gets_only_its_own_nodes(
    populated: ContextFS, selection: Selection, wanted: list[str]
) -> None:
    assert uris(export(populated, selection)) == wanted


def test_a_selection_is_checked() -> None:
    with pytest.raises(ValueError, match="name the account"):
        Selection(user="ann")
    with pytest.raises(ValueError, match="not both"):
        Selection(account="acme", user="ann", agent="bot")
    with pytest.raises(ValueError):
        Selection(account="acme", user="../etc")


def test_it_streams_one_node_at_a_time(
    populated: ContextFS, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = populated.read_files

    def counting(uri: object, names: object, ctx: object = None) -> object:
        reads.append(str(uri))
        return real(uri, names)  # type: ignore[arg-type]

    monkeypatch.setattr(populated, "read_files", counting)
    nodes = 0
    for record in export_records(populated, Selection()):
        nodes += record.kind == "node"
        assert len(reads) == nodes  # read as it is yielded, never ahead
    assert nodes == len(NODES)


def test_after_any_record_the_rest_follows(populated: ContextFS) -> None:
    full = export(populated).splitlines(keepends=True)
    for i, line in enumerate(full):
        rest = export(populated, after=json.loads(line)["uri"])
        assert rest == "".join(full[i + 1 :])
    # a cursor that names no record: everything after its place in the order
    assert uris(export(populated, after="ctx://acme/users/ann/memories/entities/c"))[0] == (
        "ctx://acme/users/ann/memories/entities/lisbon"
    )


def test_an_interrupted_export_file_resumes(populated: ContextFS, tmp_path: Path) -> None:
    full = export(populated)
    lines = full.splitlines(keepends=True)
    path = tmp_path / "out.jsonl"
    path.write_text("".join(lines[:4]) + lines[4][:25])  # killed mid-line
    cursor = last_uri(path)
    assert cursor == json.loads(lines[3])["uri"]
    assert path.read_text() == "".join(lines[:4])  # the cut-off line is gone
    with open(path, "a") as f:
        write_export(populated, Selection(), f, after=cursor)
    assert path.read_text() == full
    assert last_uri(path) == json.loads(lines[-1])["uri"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert last_uri(empty) is None
    empty.write_text('{"format": 1, "kind')  # only a cut-off line
    assert last_uri(empty) is None and empty.read_text() == ""


def test_the_report_counts_and_gives_the_cursor(populated: ContextFS) -> None:
    seen: list[tuple[int, str]] = []
    report = write_export(
        populated, Selection(), io.StringIO(), progress=lambda n, u: seen.append((n, u))
    )
    assert (report.nodes, report.sessions) == (len(NODES), 2)
    assert seen[-1] == (len(NODES) + 2, report.last_uri)
