"""Error semantics of a commit: phases 1-3 write nothing, 4 may be partial, 5 never fails."""

from __future__ import annotations

import pytest
from conftest import SESSION_1, SESSION_2, FailingLLM, commit, request, snapshot
from outbox_twin import MemoryOutbox

from ctxpipe.commit.context_writer import ContextWriter
from ctxpipe.core.enums import CommitStatus, ExtractorStatus
from ctxpipe.core.errors import CommitError

# the session's one extraction call (the default) failing falls back to the archive summary's
# and each extractor's own calls: these tests fail it too, then the ones they name
SESSION = "extraction.session"
EXTRACTION_PROMPTS = {
    SESSION,
    "extraction.profile",
    "extraction.preferences",
    "extraction.entity_event",
    "extraction.procedure",
}


def test_archive_failure_raises_and_writes_nothing(make_components, unit_settings):
    comp = make_components(llm=FailingLLM({SESSION, "compression.archive_summary"}))
    with pytest.raises(CommitError) as info:
        commit(comp, request(SESSION_1))
    assert info.value.phase == "archive"
    assert snapshot(unit_settings.fs_root) == {}


def test_every_extractor_failing_raises_extract(make_components, unit_settings):
    comp = make_components(llm=FailingLLM(EXTRACTION_PROMPTS))
    with pytest.raises(CommitError) as info:
        commit(comp, request(SESSION_1))
    assert info.value.phase == "extract"
    assert "profile" in str(info.value)
    assert snapshot(unit_settings.fs_root) == {}


def test_one_extractor_failing_is_partial_and_named(make_components):
    comp = make_components(llm=FailingLLM({SESSION, "extraction.preferences"}))
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.PARTIAL
    by_name = {r.extractor: r for r in result.extractors}
    assert by_name["preferences"].status is ExtractorStatus.FAILED
    assert "simulated failure" in by_name["preferences"].reason
    assert by_name["profile"].status is ExtractorStatus.OK
    assert "preferences" in result.reason
    assert result.stats.nodes_created > 0


def test_plan_failure_raises_plan_and_leaves_fs_untouched(make_components, unit_settings):
    commit(make_components(), request(SESSION_1, commit_id="c1"))
    before = snapshot(unit_settings.fs_root)
    comp = make_components(llm=FailingLLM({"policy.merge_bundle"}))
    with pytest.raises(CommitError) as info:
        commit(comp, request(SESSION_2, session="s2", commit_id="c2"))
    assert info.value.phase == "plan"
    assert snapshot(unit_settings.fs_root) == before


def test_write_failure_of_one_node_is_partial(make_components, monkeypatch):
    real = ContextWriter.apply_plan

    def flaky(self, ctx, plan, commit_id):  # type: ignore[no-untyped-def]
        if "/preferences/" in plan.target_uri:
            raise OSError("disk quota exceeded")
        return real(self, ctx, plan, commit_id)

    monkeypatch.setattr(ContextWriter, "apply_plan", flaky)
    comp = make_components()
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.PARTIAL
    failed = [w for w in result.write_results if w.error]
    assert failed and all("/preferences/" in w.uri for w in failed)
    assert "disk quota exceeded" in result.reason
    assert comp.fs.exists("ctx://acme/users/alice/memories/profile")


def test_outbox_failure_keeps_commit_successful(make_components):
    comp = make_components(outbox=MemoryOutbox(fail=True))
    result = commit(comp, request(SESSION_1))
    assert result.status is CommitStatus.SUCCESS
    assert result.stats.outbox_events_queued == 0
    assert any("outbox registration failed" in w for w in result.warnings)
    assert comp.fs.exists("ctx://acme/users/alice/memories/profile")
