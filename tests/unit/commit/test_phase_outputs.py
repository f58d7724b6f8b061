"""The typed phase outputs: the ledger's JSON by key parsed into each phase's model.

The JSON that the steps stored before their outputs were models, round-tripped through both
ledgers and run to the end of a commit, is in tests/integration/ledger/."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxpipe.commit.outputs import EXTRACT_KEYS, ExtractorProgress, PhaseOutputs
from ctxpipe.core.enums import ExtractorStatus
from ctxpipe.core.errors import CommitError
from ctxpipe.core.models import ExtractorReport
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.storage.commit_ledger import JsonObject


def extracted(name: str) -> JsonObject:
    """An extractor's stored output, as a dict literal (with the defaults left out)."""
    return {"report": {"extractor": name, "status": "empty", "reason": "nothing"}}


def test_each_key_is_parsed_into_its_phases_model() -> None:
    stored: dict[str, JsonObject] = {
        "archive": {"archive": {"session_id": "s1"}, "duration_ms": 3},
        "plan": {"candidates_extracted": 2},
        "write": {"failed": ["ctx://x"]},
        **{k: extracted(k.removeprefix("extract:")) for k in EXTRACT_KEYS},
    }
    outs = PhaseOutputs.from_stored(stored)
    assert outs.archive is not None and outs.archive.archive.session_id == "s1"
    assert outs.plan is not None and outs.plan.candidates_extracted == 2
    assert outs.write is not None and outs.write.failed == ["ctx://x"]
    assert outs.result is None
    results = outs.extraction_results()
    assert [r.report.extractor for r in results] == list(EXTRACTOR_NAMES)
    assert all(r.report.status is ExtractorStatus.EMPTY for r in results)


def test_nothing_stored_yet_and_a_missing_extractor() -> None:
    outs = PhaseOutputs.from_stored({})
    assert (outs.archive, outs.plan, outs.write, outs.result, outs.extracted) == (
        None,
        None,
        None,
        None,
        {},
    )
    partial = PhaseOutputs.from_stored({EXTRACT_KEYS[0]: extracted(EXTRACTOR_NAMES[0])})
    with pytest.raises(CommitError, match="extractor output missing") as err:
        partial.extraction_results()
    assert err.value.phase == "extract"


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError):
        PhaseOutputs.from_stored({"plans": {}})


def test_merged_takes_what_was_stored_over_what_was_read() -> None:
    read = PhaseOutputs.from_stored(
        {"archive": {"archive": {"session_id": "mine"}}, EXTRACT_KEYS[0]: extracted("x")}
    )
    both = read.merged(
        {"archive": {"archive": {"session_id": "stored"}}, EXTRACT_KEYS[1]: extracted("y")}
    )
    assert both.archive is not None and both.archive.archive.session_id == "stored"
    assert sorted(both.extracted) == sorted(EXTRACTOR_NAMES[:2])
    assert read.archive is not None and read.archive.archive.session_id == "mine"  # unchanged


def test_an_extractors_progress_entry_is_the_json_the_row_always_held() -> None:
    report = ExtractorReport(
        extractor="profile", status=ExtractorStatus.OK, candidates=2, duration_ms=7
    )
    entry = ExtractorProgress.of(report).model_dump(mode="json")
    assert entry == {"status": "ok", "candidates": 2, "reason": "", "duration_ms": 7}
    assert ExtractorProgress.model_validate(entry).model_dump(mode="json") == entry
