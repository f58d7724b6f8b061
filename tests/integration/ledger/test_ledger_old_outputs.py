"""Outputs stored before the steps' outputs were models (old_outputs.py: the JSON as a commit in
flight across an upgrade has it in the ledger) read back unchanged, and such a commit finishes."""

from __future__ import annotations

from typing import Any

from ledger_world import CTX, Ledger, MakeComponents, row_of
from old_outputs import OLD_EXTRACTORS, OLD_MESSAGE, OLD_OUTPUTS
from pydantic import BaseModel

from ctxpipe.commit import steps
from ctxpipe.commit.outputs import EXTRACT_PREFIX, ExtractorProgress, PhaseOutputs
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.enums import CommitPhase
from ctxpipe.core.session import RequestContext
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES

# fields added to the stored shape since the literals were captured, and their default
NEWER_FIELDS = {
    "repaired": 0,  # LLMUsage: structured output
    "retried": 0,
    "failed": 0,
    "original_chars": None,  # Message: a long message kept as an excerpt
    "extraction": None,  # ArchiveOutcome: the session's one extraction call
}


def _same_or_newer(old: Any, new: Any) -> bool:
    """`new` is `old` read and written again: every value the same, and any key it adds is a
    field added since (at its default)."""
    if isinstance(old, dict) and isinstance(new, dict):
        extra = set(new) - set(old)
        return (
            set(old) <= set(new)
            and all(k in NEWER_FIELDS and new[k] == NEWER_FIELDS[k] for k in extra)
            and all(_same_or_newer(old[k], new[k]) for k in old)
        )
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(map(_same_or_newer, old, new))
    return bool(old == new)


def test_outputs_stored_as_dicts_read_back_as_models_unchanged(ledger: Ledger) -> None:
    ledger.create("old", CTX, {})
    for key, payload in OLD_OUTPUTS.items():
        ledger.save_output("old", key, payload)
    state = ledger.state("old", list(OLD_OUTPUTS))
    assert state is not None and state.outputs == OLD_OUTPUTS
    outs = PhaseOutputs.from_stored(state.outputs)
    assert outs.archive is not None and outs.plan is not None and outs.write is not None
    assert sorted(outs.extracted) == sorted(EXTRACTOR_NAMES)
    parsed: dict[str, BaseModel] = {"archive": outs.archive, "plan": outs.plan, "write": outs.write}
    parsed.update((EXTRACT_PREFIX + n, r) for n, r in outs.extracted.items())
    dumped = {k: m.model_dump(mode="json") for k, m in parsed.items()}
    assert _same_or_newer(OLD_OUTPUTS, dumped)
    entries = {n: ExtractorProgress.model_validate(e) for n, e in OLD_EXTRACTORS.items()}
    assert {n: e.model_dump(mode="json") for n, e in entries.items()} == OLD_EXTRACTORS


def test_a_commit_extracted_by_the_untyped_steps_finishes(
    ledger: Ledger, make_components: MakeComponents
) -> None:
    """Archived and extracted before an upgrade (the dicts above in the ledger), then planned,
    written and registered by these steps."""
    c = make_components()
    rc = RequestContext(**{**CTX, "session_id": "s-old"})
    req = CommitRequest(commit_id="old-1", ctx=rc, messages=[OLD_MESSAGE])  # type: ignore[list-item]
    steps.submit(ledger, req)
    ledger.complete(req.commit_id, "archive", OLD_OUTPUTS["archive"], CommitPhase.ARCHIVED)
    for name, entry in OLD_EXTRACTORS.items():  # as the extractor steps stored them
        key, progress = EXTRACT_PREFIX + name, {name: entry}
        ledger.complete(
            req.commit_id,
            key,
            OLD_OUTPUTS[key],
            CommitPhase.ARCHIVED,
            extractors=progress,
            extracted_when=len(EXTRACTOR_NAMES),
        )
    assert row_of(ledger, req.commit_id).phase == "extracted"
    planned = steps.plan_step(c, ledger, req.commit_id)
    old_plan = OLD_OUTPUTS["plan"]["items"]
    assert [i.plan.target_uri for i in planned.items] == [i["plan"]["target_uri"] for i in old_plan]
    result = steps.finish_step(c, ledger, req.commit_id)
    row = row_of(ledger, req.commit_id)
    assert row.phase == "registered" and result.status == "success"
    assert result.stats.nodes_created == len(old_plan)
    assert row.result == result.model_dump(mode="json")
    assert row.extractors == OLD_EXTRACTORS
