"""The mem0 importer: each memory a node with its dates; bad records named, nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from portability_world import tree_bytes

from ctxpipe.fs import ContextFS, LocalOwnerLock
from ctxpipe.portability import Importer, ImportFileError, mem0_parser, read_lines

GOOD = [
    {
        "id": "892db2ae-06d9-49e5-8b3e-585ef9b85b8e",
        "memory": "Is a vegetarian and allergic to nuts",
        "hash": "b3b6a2d2e1b7c3f1",
        "metadata": {"source": "onboarding"},
        "categories": ["food", "health"],
        "created_at": "2024-07-20T01:23:45.123456-07:00",
        "updated_at": "2024-08-01T10:00:00-07:00",
        "user_id": "alex",
        "agent_id": None,
        "run_id": None,
    },
    {  # no updated_at, a time without an offset (UTC), an unknown field
        "id": "mem-2",
        "memory": "Prefers window seats\nand aisle seats on long flights",
        "created_at": "2024-07-21T08:00:00",
        "user_id": "alex",
        "agent_id": "travel-bot",
        "immutable": False,
    },
    {  # an agent's memory
        "id": "mem-3",
        "memory": "Answer in French when the user writes in French",
        "created_at": "2024-07-22T08:00:00Z",
        "agent_id": "travel-bot",
    },
    {  # an id that is no URI segment
        "id": "Mem/4 ?",
        "memory": "Lives in Lisbon",
        "created_at": "2024-07-23T08:00:00Z",
        "user_id": "alex",
    },
    {
        "id": "mem-5",
        "memory": "Runs every Tuesday",
        "created_at": "2024-07-24T08:00:00Z",
        "updated_at": "2024-07-24T08:00:00Z",
        "user_id": "sam",
    },
]


def write(path: Path, records: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def run(root: Path, path: Path, category: str | None = None):  # type: ignore[no-untyped-def]
    imp = Importer(ContextFS(root), LocalOwnerLock(root), None)
    return imp.run(read_lines(str(path), mem0_parser("acme", category)))


def test_each_memory_becomes_a_node_with_its_dates(tmp_path: Path) -> None:
    report = run(tmp_path / "fs", write(tmp_path / "m.jsonl", GOOD))
    assert (report.records, report.written, report.conflicts) == (5, 5, 0)
    fs = ContextFS(tmp_path / "fs")
    uri = "ctx://acme/users/alex/memories/entities/mem0-892db2ae-06d9-49e5-8b3e-585ef9b85b8e"
    node = fs.read_node(uri)
    assert node.content == node.overview == "Is a vegetarian and allergic to nuts"
    assert node.abstract == "Is a vegetarian and allergic to nuts" and node.version == 1
    assert node.created_at == datetime(2024, 7, 20, 8, 23, 45, 123456, tzinfo=UTC)
    assert node.updated_at == datetime(2024, 8, 1, 17, 0, tzinfo=UTC)
    assert node.owner_space == "users/alex" and node.category == "entities"
    assert node.metadata["source"] == "mem0"
    assert node.metadata["mem0"] == {
        "id": GOOD[0]["id"],
        "hash": "b3b6a2d2e1b7c3f1",
        "categories": ["food", "health"],
        "metadata": {"source": "onboarding"},
    }
    [entry] = fs.history(uri)
    assert entry.version == 1 and entry.at == node.created_at and "mem0" in entry.reason
    second = fs.read_node("ctx://acme/users/alex/memories/entities/mem0-mem-2")
    assert second.abstract == "Prefers window seats" and second.updated_at == second.created_at
    assert second.created_at == datetime(2024, 7, 21, 8, tzinfo=UTC)
    assert second.metadata["mem0"]["agent_id"] == "travel-bot"
    agent = fs.read_node("ctx://acme/agents/travel-bot/memories/patterns/mem0-mem-3")
    assert agent.owner_space == "agents/travel-bot"
    odd = [u for u, _ in fs.walk_nodes("ctx://acme/users/alex/") if "lisbon" not in u]
    assert any(u.rsplit("/", 1)[-1].startswith("mem0-mem-4-") for u in odd)


def test_importing_twice_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "m.jsonl", GOOD)
    run(tmp_path / "fs", path)
    before = tree_bytes(tmp_path / "fs")
    report = run(tmp_path / "fs", path)
    assert (report.written, report.unchanged) == (0, 5)
    assert tree_bytes(tmp_path / "fs") == before


def test_a_category_can_be_chosen(tmp_path: Path) -> None:
    run(tmp_path / "fs", write(tmp_path / "m.jsonl", GOOD[4:]), category="events")
    assert ContextFS(tmp_path / "fs").exists("ctx://acme/users/sam/memories/events/mem0-mem-5")
    with pytest.raises(ValueError):
        mem0_parser("acme", "nonsense")


def test_malformed_records_are_named_and_nothing_is_written(tmp_path: Path) -> None:
    bad: list[object] = [
        GOOD[0],
        {"id": "x1", "created_at": "2024-01-01T00:00:00Z", "user_id": "alex"},  # 2: no memory
        {"id": "x2", "memory": "  ", "created_at": "2024-01-01T00:00:00Z", "user_id": "a"},  # 3
        {"id": "x3", "memory": "orphan", "created_at": "2024-01-01T00:00:00Z"},  # 4: no owner
        {"id": "x4", "memory": "m", "created_at": "last tuesday", "user_id": "alex"},  # 5
        "{not json",  # 6
        {"id": "x5", "memory": "m", "user_id": "alex"},  # 7: no created_at
        {  # 8: updated before created
            "id": "x6",
            "memory": "m",
            "created_at": "2024-02-01T00:00:00Z",
            "updated_at": "2024-01-01T00:00:00Z",
            "user_id": "alex",
        },
        {"id": "x7", "memory": "m", "created_at": "2024-01-01T00:00:00Z", "user_id": "../x"},  # 9
        [1, 2],  # 10
        GOOD[0],  # 11: the same memory twice
        GOOD[1],
    ]
    with pytest.raises(ImportFileError) as err:
        run(tmp_path / "fs", write(tmp_path / "m.jsonl", bad))
    by_line = {e.line: e.message for e in err.value.errors}
    assert sorted(by_line) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert "memory: Field required" in by_line[2]
    assert "the memory's text is empty" in by_line[3]
    assert "no owner" in by_line[4]
    assert "created_at" in by_line[5] and "not JSON" in by_line[6]
    assert "created_at: Field required" in by_line[7]
    assert "updated_at is before created_at" in by_line[8]
    assert "relative segment" in by_line[9] and "JSON object" in by_line[10]
    assert "given twice" in by_line[11]
    assert tree_bytes(tmp_path / "fs") == {}
