"""The in-process commit pipeline end to end: what a producer gets back and what lands on FS."""

from __future__ import annotations

from conftest import SESSION_1, SESSION_2, TOOLS, commit, request, snapshot
from outbox_twin import MemoryOutbox

from ctxpipe.core.enums import CommitStatus, ExtractorStatus, MemoryCategory, WriteAction
from ctxpipe.core.models import CommitOptions


def written_uris(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [w.uri for w in result.write_results if w.action is not WriteAction.SKIP]


def test_commit_creates_memories_archive_relations_and_events(make_components):
    outbox = MemoryOutbox()
    comp = make_components(outbox=outbox)
    result = commit(comp, request(SESSION_1, tools=TOOLS))

    assert result.status is CommitStatus.SUCCESS, result.reason
    assert {r.extractor for r in result.extractors} == {
        "profile",
        "preferences",
        "entity_event",
        "procedure",
    }
    uris = written_uris(result)
    assert "ctx://acme/users/alice/memories/profile" in uris
    assert any(u.startswith("ctx://acme/users/alice/memories/preferences/") for u in uris)
    assert any(u.startswith("ctx://acme/users/alice/memories/events/") for u in uris)
    assert any(u.startswith("ctx://acme/agents/helper/memories/cases/") for u in uris)
    assert "ctx://acme/agents/helper/memories/skills/sql-runner" in uris
    assert result.stats.nodes_created == len(uris)

    archive = result.archive
    assert archive is not None and archive.archive_uri == "ctx://acme/sessions/s1/archives/1"
    arch_node = comp.fs.read_node(archive.archive_uri)
    assert "[m7]" in arch_node.content and "ImportError" in arch_node.content

    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert "data engineer" in profile.content.lower()
    assert "s1:m1" in profile.source_refs
    assert profile.version == 1

    # every written memory is derived_from the archive; events registered per node version
    edges = comp.relations.get_edges("ctx://acme/users/alice/memories/profile")
    assert any(e.to_uri == archive.archive_uri and e.relation_type == "derived_from" for e in edges)
    upserts = {e.uri for e in outbox.events.values() if e.event_type == "UPSERT_CONTEXT"}
    assert set(uris) | {archive.archive_uri} == upserts
    assert result.stats.outbox_events_queued == len(outbox.events)


def test_same_commit_id_twice_is_byte_for_byte_idempotent(make_components, unit_settings):
    outbox = MemoryOutbox()
    comp = make_components(outbox=outbox)
    first = commit(comp, request(SESSION_1, tools=TOOLS))
    before = snapshot(unit_settings.fs_root)
    events_before = dict(outbox.events)

    second = commit(comp, request(SESSION_1, tools=TOOLS))

    assert snapshot(unit_settings.fs_root) == before
    assert outbox.events == events_before
    assert first.stats.nodes_created > 0
    assert second == first  # the recorded result of that commit id, nothing re-run
    skills = comp.fs.read_node("ctx://acme/agents/helper/memories/skills/sql-runner")
    assert skills.metadata["stats"]["call_count"] == 2  # not double counted


def test_second_session_updates_profile_instead_of_duplicating(make_components):
    comp = make_components()
    commit(comp, request(SESSION_1, commit_id="c1"))
    result = commit(comp, request(SESSION_2, session="s2", commit_id="c2"))

    assert result.status is CommitStatus.SUCCESS
    profile_writes = [
        w for w in result.write_results if w.uri == "ctx://acme/users/alice/memories/profile"
    ]
    assert [w.action for w in profile_writes] == [WriteAction.MERGE]
    profile = comp.fs.read_node("ctx://acme/users/alice/memories/profile")
    assert profile.version == 2
    text = profile.content.lower()
    assert "machine learning engineer" in text
    assert "berlin" in text
    assert {"s1:m1", "s2:n1"} <= set(profile.source_refs)
    children = comp.fs.list_children("ctx://acme/users/alice/memories/")
    assert sum(1 for c in children if c.name.startswith("profile")) == 1


def test_small_talk_stores_nothing_and_says_why(make_components):
    comp = make_components()
    msgs = [
        {"id": "a", "role": "user", "content": "hey"},
        {"id": "b", "role": "assistant", "content": "Hello! How can I help?"},
        {"id": "c", "role": "user", "content": "ok thanks, bye"},
    ]
    result = commit(comp, request(msgs))
    assert result.status is CommitStatus.SUCCESS
    assert result.stats.nodes_created == 0
    assert "no memory stored" in result.reason
    # nothing in it for any extractor: each one is gated without an LLM call
    assert all(r.status is ExtractorStatus.SKIPPED for r in result.extractors)
    assert all(r.reason.startswith("gated: ") for r in result.extractors)
    assert list(result.stats.llm_by_phase) == ["archive"]


def test_injected_memory_is_never_stored_again(make_components):
    comp = make_components()
    msgs = [
        {
            "id": "x1",
            "role": "system",
            "injected": True,
            "content": "Known about the user: I love sushi and I prefer dark mode.",
        },
        {"id": "x2", "role": "user", "content": "What should I cook tonight?"},
        {"id": "x3", "role": "assistant", "content": "Maybe a simple pasta?"},
        {"id": "x4", "role": "user", "content": "Good idea, thanks."},
    ]
    result = commit(comp, request(msgs))
    for w in result.write_results:
        if w.action is WriteAction.SKIP:
            continue
        node = comp.fs.read_node(w.uri)
        assert "sushi" not in node.content.lower(), w.uri
        assert not any(r.endswith(":x1") for r in node.source_refs)


def test_dry_run_returns_plans_and_writes_nothing(make_components, unit_settings):
    comp = make_components()
    result = commit(comp, request(SESSION_1, options=CommitOptions(dry_run=True)))
    assert result.dry_run
    assert result.plans and any(p.action is WriteAction.CREATE for p in result.plans)
    assert result.write_results == []
    assert snapshot(unit_settings.fs_root) == {}


def test_categories_filter_and_max_candidates(make_components):
    comp = make_components()
    opts = CommitOptions(categories_filter=[MemoryCategory.PROFILE], skip_archive=True)
    result = commit(comp, request(SESSION_1, options=opts))
    status = {r.extractor: r.status for r in result.extractors}
    assert status["profile"] is ExtractorStatus.OK
    assert status["preferences"] is ExtractorStatus.SKIPPED
    assert written_uris(result) == ["ctx://acme/users/alice/memories/profile"]
    assert result.archive is not None and result.archive.archive_uri is None

    capped = commit(
        make_components(),
        request(SESSION_1, commit_id="c9", options=CommitOptions(max_candidates=1)),
    )
    assert len([p for p in capped.plans]) == 1
    assert any("cap of 1" in s.reason for s in capped.skipped)


def test_every_phase_rerun_with_the_same_input_changes_nothing(make_components, unit_settings):
    """What Celery redelivery does: run a phase again with the same input."""
    import asyncio

    from ctxpipe.commit import phases, register
    from ctxpipe.extraction.extractors import EXTRACTOR_NAMES

    outbox = MemoryOutbox()
    comp = make_components(outbox=outbox)
    req = request(SESSION_1, tools=TOOLS, commit_id="redeliver")

    async def run():  # type: ignore[no-untyped-def]
        archived = await phases.archive_phase(comp, req)
        results = [await phases.extract_phase(comp, n, req, archived) for n in EXTRACTOR_NAMES]
        plan = await phases.plan_phase(comp, req, archived.archive, results)
        written = await phases.write_phase(comp, req, archived.archive, plan)
        first = register.register_phase(comp, req, archived.archive, plan, written)
        tree, events = snapshot(unit_settings.fs_root), dict(outbox.events)

        again = await phases.write_phase(comp, req, archived.archive, plan)  # redelivered write
        assert [(w.uri, w.node_version) for w in again.write_results] == [
            (w.uri, w.node_version) for w in written.write_results
        ]
        assert again.archive == written.archive
        second = register.register_phase(comp, req, archived.archive, plan, again)
        assert snapshot(unit_settings.fs_root) == tree
        assert outbox.events == events
        assert {e.event_id for e in second.outbox_events} == {
            e.event_id for e in first.outbox_events
        }

    asyncio.run(run())
