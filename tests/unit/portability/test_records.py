"""The JSONL record model: exact both ways, versioned, and strict about what it accepts."""

from __future__ import annotations

import json

import pytest
from portability_world import ANN

from ctxpipe.fs import ContextFS
from ctxpipe.fs.context_fs import RESTORE_FILES
from ctxpipe.portability.records import (
    FORMAT_VERSION,
    NodeRecord,
    RecordError,
    SessionRecord,
    dump_line,
    node_files,
    parse_line,
    record_of,
)

BISCUIT = f"{ANN}/entities/biscuit"


def test_a_node_becomes_a_record_and_back_byte_for_byte(populated: ContextFS) -> None:
    files = populated.read_files(BISCUIT, RESTORE_FILES)
    record = record_of(files)
    assert record.version == 2 and len(record.history) == 2
    assert record.relations is not None and len(record.relations.edges) == 2
    assert record.levels.abstract == "Biscuit is a golden retriever."
    assert node_files(record) == {k: v for k, v in files.items() if v is not None}
    again = parse_line(dump_line(record), 1)
    assert again == record and node_files(again) == node_files(record)


def test_every_line_carries_the_format_version(populated: ContextFS) -> None:
    line = dump_line(record_of(populated.read_files(BISCUIT, RESTORE_FILES)))
    assert line.endswith("\n") and "\n" not in line[:-1]
    data = json.loads(line)
    assert data["format"] == FORMAT_VERSION == 1 and data["kind"] == "node"
    session = SessionRecord(uri="ctx://acme/sessions/s1/", user_id="ann", agent_id="bot")
    assert json.loads(dump_line(session))["format"] == 1


def _line(populated: ContextFS, **change: object) -> str:
    data = json.loads(dump_line(record_of(populated.read_files(BISCUIT, RESTORE_FILES))))
    data.update(change)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"format": 2}, "format 2 is not 1"),
        ({"format": None}, "format None is not 1"),
        ({"kind": "folder"}, "does not match any of the expected tags"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"version": 0}, "version: Input should be greater than or equal to 1"),
        ({"content_hash": "0" * 64}, "content_hash does not match the levels"),
        ({"owner_space": "users/bob"}, "owner_space 'users/bob' does not match"),
        ({"uri": f"{BISCUIT}/"}, "is not canonical"),
        ({"uri": "ctx://acme/users/../etc"}, "relative segment"),
        ({"uri": "ctx://acme/users/"}, "is a scope root"),
        ({"created_at": "yesterday"}, "created_at: Input should be a valid datetime"),
    ],
)
def test_a_bad_line_is_named_with_its_number(
    populated: ContextFS, change: dict[str, object], why: str
) -> None:
    with pytest.raises(RecordError) as err:
        parse_line(_line(populated, **change), 7)
    assert err.value.line == 7 and why in str(err.value) and str(err.value).startswith("line 7: ")


def test_relations_never_cross_accounts(populated: ContextFS) -> None:
    data = json.loads(_line(populated))
    data["relations"]["edges"][0]["to_uri"] = "ctx://globex/users/ann/memories/profile"
    with pytest.raises(RecordError, match="crosses accounts"):
        parse_line(json.dumps(data), 1)


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '"a string"'])
def test_a_line_that_is_no_json_object(text: str) -> None:
    with pytest.raises(RecordError, match="line 3: "):
        parse_line(text, 3)


def test_a_session_record_names_a_session() -> None:
    ok = parse_line(
        '{"format": 1, "kind": "session", "uri": "ctx://acme/sessions/s1/", '
        '"user_id": "ann", "agent_id": "bot"}',
        1,
    )
    assert isinstance(ok, SessionRecord) and ok.session_id == "s1"
    for uri in ("ctx://acme/sessions/s1", "ctx://acme/users/s1/", "ctx://acme/sessions/s1/x/"):
        with pytest.raises(RecordError, match="is not a session"):
            parse_line(json.dumps({"format": 1, "kind": "session", "uri": uri,
                                   "user_id": "ann", "agent_id": "bot"}), 1)  # fmt: skip


def test_the_key_is_the_walk_order() -> None:
    def rec(uri: str) -> NodeRecord:
        return NodeRecord.model_construct(uri=uri)

    uris = ["ctx://a/users/x-y", "ctx://a/users/x/z", "ctx://a/users/x", "ctx://a/agents/q"]
    ordered = sorted(uris, key=lambda u: rec(u).key())
    assert ordered == ["ctx://a/agents/q", "ctx://a/users/x", "ctx://a/users/x/z",
                       "ctx://a/users/x-y"]  # fmt: skip
