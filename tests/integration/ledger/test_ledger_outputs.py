"""The phases' outputs in the ledger: write-once (the first stored wins), stored as JSON copies,
refused for an unknown commit, recorded as the result, and stored together all or none."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_world import CTX, UNKNOWN_COMMIT, Ledger, row_of

from ctxpipe.core.enums import CommitPhase
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.storage.commit_ledger import Completion


def test_the_first_stored_output_wins(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    first = ledger.complete("c", "extract:a", {"v": 1}, CommitPhase.ARCHIVED)
    again = ledger.complete("c", "extract:a", {"v": 2}, CommitPhase.ARCHIVED)
    assert first == again == {"v": 1}
    assert ledger.save_output("c", "extract:b", {"v": 3}) == {"v": 3}
    assert ledger.save_output("c", "extract:b", {"v": 4}) == {"v": 3}
    ledger.save_output("c", "plan", {"p": [1, 2]})
    assert ledger.load_output("c", "extract:a") == {"v": 1}
    assert ledger.load_output("c", "write") is None and ledger.load_output("nope", "plan") is None
    assert ledger.load_outputs("c", "extract:") == {"extract:a": {"v": 1}, "extract:b": {"v": 3}}
    assert ledger.load_outputs("nope", "extract:") == {}


def test_what_is_stored_is_a_json_copy(ledger: Ledger) -> None:
    """A caller's object is never the stored one: changing it, or what a read returned,
    changes nothing stored; what is read back is JSON (a tuple comes back a list)."""
    request: dict[str, Any] = {"messages": [{"id": "m1"}]}
    ledger.create("c", CTX, request)
    request["messages"].append({"id": "m2"})
    payload: dict[str, Any] = {"items": (1, 2)}
    stored = ledger.complete("c", "plan", payload, CommitPhase.PLANNED, with_result=True)
    assert stored == {"items": [1, 2]}
    payload["items"] = ()
    stored["items"].append(3)
    ledger.load_output("c", "plan")["items"].append(4)  # type: ignore[index]
    state = ledger.state("c", ["plan"])
    assert state is not None and state.outputs == {"plan": {"items": [1, 2]}}
    assert state.request == {"messages": [{"id": "m1"}]}
    state.request["messages"].clear()
    row = row_of(ledger, "c")
    assert row.request == {"messages": [{"id": "m1"}]} and row.result == {"items": [1, 2]}


def test_an_output_of_an_unknown_commit_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UNKNOWN_COMMIT):
        ledger.save_output("nope", "plan", {})
    with pytest.raises(UNKNOWN_COMMIT):
        ledger.complete("nope", "plan", {}, CommitPhase.PLANNED)
    with pytest.raises(UNKNOWN_COMMIT):
        ledger.complete_all("nope", [Completion("plan", {}, CommitPhase.PLANNED)])
    assert ledger.get("nope") is None and ledger.load_output("nope", "plan") is None


def test_a_completion_with_result_records_the_stored_output(ledger: Ledger) -> None:
    ledger.create("c", CTX, {})
    ledger.advance("c", CommitPhase.WRITTEN)
    done = ledger.complete(
        "c",
        "register",
        {"status": "success"},
        CommitPhase.REGISTERED,
        status="success",
        timings={"register_ms": 2},
        with_result=True,
    )
    again = ledger.complete(
        "c", "register", {"status": "other"}, CommitPhase.REGISTERED, with_result=True
    )
    row = row_of(ledger, "c")
    assert done == again == row.result == {"status": "success"}
    assert (row.phase, row.status) == ("registered", "success")
    assert row.timings == {"register_ms": 2}


def test_outputs_stored_together_are_stored_all_or_none(ledger: Ledger) -> None:
    """`complete_all` stores a step's outputs in one transaction: all of them, advancing the
    commit as each would; an output stored first stands; and when one cannot be stored (it
    is not JSON) none of them is."""
    assert ledger.complete_all("c", []) == []
    ledger.create("all", CTX, {})
    ledger.complete("all", "extract:profile", {"first": True}, CommitPhase.ARCHIVED)
    done = [Completion("archive", {"a": 1}, CommitPhase.ARCHIVED, timings={"archive_ms": 3})]
    done += [
        Completion(
            f"extract:{n}",
            {"name": n},
            CommitPhase.ARCHIVED,
            extractors={n: {"status": "ok"}},
            extracted_when=len(EXTRACTOR_NAMES),
        )
        for n in EXTRACTOR_NAMES
    ]
    stored = ledger.complete_all("all", done)
    assert stored[0] == {"a": 1}
    assert stored[1:] == [
        {"first": True} if n == "profile" else {"name": n} for n in EXTRACTOR_NAMES
    ]
    row = row_of(ledger, "all")
    assert row.phase == "extracted" and row.timings["archive_ms"] == 3
    assert set(row.extractors) == set(EXTRACTOR_NAMES)

    ledger.create("none", CTX, {})
    unstorable = Completion("extract:profile", {"tags": {"a", "b"}}, CommitPhase.ARCHIVED)
    with pytest.raises(TypeError):  # a set is not JSON
        ledger.complete_all(
            "none", [Completion("archive", {"a": 1}, CommitPhase.ARCHIVED), unstorable]
        )
    assert ledger.load_output("none", "archive") is None
    assert row_of(ledger, "none").phase == "enqueued"
