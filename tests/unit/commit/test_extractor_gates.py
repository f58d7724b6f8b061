"""A commit whose extractors are gated: SKIPPED with the reason, no LLM call, on any provider."""

from __future__ import annotations

from typing import Any

from conftest import SESSION_1, SESSION_2, FailingLLM, commit, request

from ctxpipe.commit import phases
from ctxpipe.core.enums import CommitStatus, ExtractorStatus
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM

QUESTIONS = [
    {"id": "q1", "role": "user", "content": "what is the tallest tree species?"},
    {"id": "q2", "role": "assistant", "content": "The coast redwood, up to about 115 metres."},
    {"id": "q3", "role": "user", "content": "and the oldest?"},
    {"id": "q4", "role": "assistant", "content": "A Great Basin bristlecone pine."},
    {"id": "q5", "role": "user", "content": "ok, thanks!"},
]
EXTRACTION_PROMPTS = {
    "extraction.profile",
    "extraction.preferences",
    "extraction.entity_event",
    "extraction.procedure",
}


class CountingLLM:
    """The real rules LLM, counting the calls per prompt id."""

    name = "counting"

    def __init__(self) -> None:
        self._inner = RulesLLM()
        self.calls: list[str] = []

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        self.calls.append(prompt_id)
        return await self._inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


def test_gated_extractors_report_skipped_with_the_reason_and_call_no_llm(make_components):
    llm = CountingLLM()
    result = commit(make_components(llm=llm), request(QUESTIONS))

    assert result.status is CommitStatus.SUCCESS
    reports = {r.extractor: r for r in result.extractors}
    assert set(reports) == {"profile", "preferences", "entity_event", "procedure"}
    for name, report in reports.items():
        assert report.status is ExtractorStatus.SKIPPED, name
        assert report.reason.startswith("gated: "), report.reason
        assert report.candidates == 0
    assert "first-person" in reports["profile"].reason
    assert "no tool use" in reports["procedure"].reason
    assert not set(llm.calls) & EXTRACTION_PROMPTS
    assert result.stats.llm_calls == len(llm.calls)  # the archive's summary only
    assert not any(k.startswith("extract_") for k in result.stats.llm_by_phase)
    # the commit says why it wrote no memory, naming each gate
    assert "profile: skipped (gated: " in result.reason


def test_a_gated_extractor_never_reaches_the_provider(make_components):
    """The gate runs before any provider: a provider that would fail is not even called."""
    llm = FailingLLM(EXTRACTION_PROMPTS)
    result = commit(make_components(llm=llm), request(QUESTIONS))
    assert result.status is CommitStatus.SUCCESS
    assert {r.status for r in result.extractors} == {ExtractorStatus.SKIPPED}


def test_a_session_with_something_to_extract_asks_every_extractor_in_one_call(make_components):
    llm = CountingLLM()
    result = commit(make_components(llm=llm), request(SESSION_1))
    assert llm.calls.count("extraction.session") == 1  # the summary and all four extractors
    assert not set(llm.calls) & (EXTRACTION_PROMPTS | {"compression.archive_summary"})
    assert ExtractorStatus.SKIPPED not in {r.status for r in result.extractors}
    assert result.stats.llm_calls == len(llm.calls)


def test_one_call_per_extractor_on_request_extracts_the_same_candidates(
    make_components, unit_settings
):
    """`CTXPIPE_COMMIT__EXTRACTION_CALLS=extractor`: the summary and each extractor in calls of
    their own, and on the rules provider the same archive and candidates as the one call."""

    def extract(llm: Any, calls: str) -> tuple[Any, list[Any]]:
        config = unit_settings.commit.model_copy(update={"extraction_calls": calls})
        comp = make_components(
            llm=llm, settings=unit_settings.model_copy(update={"commit": config})
        )
        req = request(SESSION_1)

        async def run() -> tuple[Any, list[Any]]:
            archived = await phases.archive_phase(comp, req)
            return archived, [
                await phases.extract_phase(comp, n, req, archived) for n in EXTRACTOR_NAMES
            ]

        return run_sync(run())

    one, separate = CountingLLM(), CountingLLM()
    archived, per_session = extract(one, "session")
    archived_apart, per_extractor = extract(separate, "extractor")
    assert one.calls == ["extraction.session"]
    assert sorted(separate.calls) == sorted(EXTRACTION_PROMPTS | {"compression.archive_summary"})
    assert archived.extraction is not None and archived_apart.extraction is None
    assert archived_apart.archive.summary == archived.archive.summary
    assert [r.candidates for r in per_extractor] == [r.candidates for r in per_session]
    assert any(r.candidates for r in per_session)


def test_a_session_committed_again_merges_nothing_and_calls_no_merge(make_components):
    """A producer's retry under a new commit id: every line is already in the profile node,
    so the merge is skipped before `policy.merge_bundle` is called and the node is unchanged."""
    comp = make_components()
    commit(comp, request(SESSION_1, commit_id="first"))
    uri = "ctx://acme/users/alice/memories/profile"
    before = comp.fs.read_node(uri)

    llm = CountingLLM()
    again = commit(make_components(llm=llm), request(SESSION_1, commit_id="retry"))

    assert again.status is CommitStatus.SUCCESS
    assert "policy.merge_bundle" not in llm.calls
    plan = next(p for p in again.plans if p.target_uri == uri)
    assert plan.reason.endswith("merge adds nothing new (every line already in the node)")
    after = comp.fs.read_node(uri)
    assert (after.version, after.content) == (before.version, before.content)


def test_a_merge_with_a_new_line_still_calls_the_llm(make_components):
    comp = make_components()
    commit(comp, request(SESSION_1, commit_id="first"))
    llm = CountingLLM()
    result = commit(make_components(llm=llm), request(SESSION_2, commit_id="second", session="s2"))
    assert "policy.merge_bundle" in llm.calls
    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert "machine learning engineer" in profile.content
    assert result.status is CommitStatus.SUCCESS
