"""`policy.merge_bundle` with the rules provider: keep, add, supersede, stay idempotent."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_examples import examples

from ctxpipe.core.llm_schemas import ExtractionOutput, MergeOutput
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.providers.rules.lines import parse_lines

LLM = RulesLLM()


def profile_of(*contents: str) -> Any:
    msgs = [{"id": f"m{i}", "role": "user", "content": c} for i, c in enumerate(contents, 1)]
    out = LLM.complete_json_sync(
        "extraction.profile", {"messages": msgs, "tools": []}, ExtractionOutput
    )
    assert len(out.memories) == 1
    return out.memories[0]


def merge(category: str, old: Any, new: Any) -> MergeOutput:
    def part(obj: Any, field: str) -> str:
        return str(obj[field] if isinstance(obj, dict) else getattr(obj, field))

    return LLM.complete_json_sync(
        "policy.merge_bundle",
        {
            "category": category,
            "existing_abstract": part(old, "abstract"),
            "existing_overview": part(old, "overview"),
            "existing_content": part(old, "content"),
            "new_abstract": part(new, "abstract"),
            "new_overview": part(new, "overview"),
            "new_content": part(new, "content"),
        },
        MergeOutput,
    )


def bundle(abstract: str, overview: str, content: str = "") -> dict[str, str]:
    return {"abstract": abstract, "overview": overview, "content": content}


def valid_and_closed(text: str) -> tuple[list[str], dict[str, str]]:
    lines = parse_lines(text)
    return (
        [ln.text for ln in lines if ln.active],
        {ln.text: ln.validity.superseded for ln in lines if not ln.active},
    )


def test_job_change_supersedes_and_keeps_everything() -> None:
    before = profile_of(
        "My name is Priya and I work at Northwind Traders as a backend developer.",
        "I live in Porto. I mostly use Go and Postgres.",
    )
    after = profile_of("Big news: I joined Contoso as an engineering manager last week.")
    out = merge("profile", before, after)
    valid, closed = valid_and_closed(out.overview)
    joined = next(t for t in valid if "Contoso" in t)
    # the employer is single-valued: the new one closes the old one, named as its successor
    assert closed == {"The user works at Northwind Traders as a backend developer.": joined}
    # what accumulates stays valid: the name, the home, the tools
    assert any("Priya" in t for t in valid) and any("Porto" in t for t in valid)
    assert any("Go and Postgres" in t for t in valid)
    assert "Contoso" in out.abstract and "Northwind" not in out.abstract
    assert len(out.conflicts) == 1 and "1 line(s) closed" in out.reason
    # the closed line stays in the full text too, with its ids
    closed = next(ln for ln in out.content.splitlines() if "The user works at Northwind" in ln)
    assert closed.startswith("- The user works at Northwind Traders as a backend developer. [m1]")
    assert "(superseded: The user joined Contoso" in closed
    assert '— "My name is Priya and I work at Northwind' in closed  # the user's own words


def test_merge_is_idempotent() -> None:
    before = profile_of("I'm a data engineer at Acme Analytics. I live in Lisbon.")
    after = profile_of("I joined Globex as a staff engineer and I speak Portuguese.")
    once = merge("profile", before, after)
    twice = merge("profile", once, after)
    assert (twice.abstract, twice.overview, twice.content) == (
        once.abstract,
        once.overview,
        once.content,
    )
    assert twice.conflicts == []
    assert "nothing new" in twice.reason
    # and merging the old bundle into itself changes nothing either
    same = merge("profile", before, before)
    assert same.overview == before.overview and same.conflicts == []


def test_near_identical_lines_fold_their_refs() -> None:
    old = bundle("Food preferences: loves spicy food", "- loves spicy food [t5]")
    new = bundle("Food preferences: loves spicy food", "- loves spicy food! [k2]")
    out = merge("preferences", old, new)
    assert out.overview == "- loves spicy food [t5, k2]"
    assert out.conflicts == []


def test_new_facts_on_other_topics_accumulate() -> None:
    old = bundle("Languages preferences: likes Rust", "- likes Rust [a1]")
    new = bundle("Languages preferences: likes Go", "- likes Go [b4]\n- uses Zig at work [b5]")
    out = merge("preferences", old, new)
    assert out.overview.splitlines() == [
        "- likes Rust [a1]",
        "- likes Go [b4]",
        "- uses Zig at work [b5]",
    ]
    assert out.conflicts == []
    # the abstract states every valid line, the newest first
    assert out.abstract == "Languages preferences: uses Zig at work; likes Go; likes Rust"


def test_opposite_polarity_on_the_same_topic_is_a_conflict() -> None:
    old = bundle("Food preferences: dislikes cilantro", "- dislikes cilantro [a3]")
    new = bundle("Food preferences: likes cilantro", "- likes cilantro now [b1]")
    out = merge("preferences", old, new)
    assert "- dislikes cilantro [a3] (superseded: likes cilantro now)" in out.overview
    assert len(out.conflicts) == 1 and "dislikes" in out.conflicts[0]
    assert out.abstract == "Food preferences: likes cilantro now"


def test_a_reversal_closes_only_the_line_on_its_topic() -> None:
    old = bundle("Editor preferences", "- prefers tabs [a1]\n- likes Neovim [a2]")
    new = bundle("Editor preferences", "- doesn't like Neovim anymore [b1]")
    out = merge("preferences", old, new)
    valid, closed = valid_and_closed(out.overview)
    assert closed == {"likes Neovim": "doesn't like Neovim anymore"}
    assert valid == ["prefers tabs", "doesn't like Neovim anymore"]


def test_outside_profile_and_preferences_lines_accumulate() -> None:
    old = bundle(
        "Hannah (person, the user's sister): The user's sister Hannah lives in Porto.",
        "- type: person\n- The user's sister Hannah lives in Porto. [t3]",
    )
    new = bundle(
        "Hannah (person, the user's sister): Hannah lives in Braga.",
        "- type: person\n- Hannah lives in Braga now. [x2]",
    )
    out = merge("entities", old, new)
    ov = out.overview.splitlines()
    assert "- The user's sister Hannah lives in Porto. [t3]" in ov
    assert "- Hannah lives in Braga now. [x2]" in ov
    assert ov.count("- type: person") == 1 and out.conflicts == []
    assert out.abstract.startswith("Hannah (person, the user's sister): ")
    assert "Braga" in out.abstract and "Porto" in out.abstract


def test_single_valued_keys_and_free_text() -> None:
    old = bundle("Event", "- status: planned\n- date: 2026-06-06", "Wedding planned in Porto.")
    new = bundle("Event", "- status: happened", "Wedding planned in Porto.\nIt rained.")
    out = merge("events", old, new)
    assert "- status: planned (superseded: status: happened)" in out.overview
    assert "- date: 2026-06-06" in out.overview.splitlines()
    assert out.content.splitlines() == ["Wedding planned in Porto.", "It rained."]


_PRED = st.sampled_from(
    ["works at", "lives in", "likes", "dislikes", "doesn't like", "prefers", "uses", "status:"]
)
_OBJ = st.sampled_from(
    ["Acme", "Globex", "a data engineer at Acme", "tabs", "Neovim", "VS Code", "cilantro", "Porto"]
)
_LINE = st.tuples(_PRED, _OBJ, st.sampled_from(["m1", "m2"]), st.integers(0, 2), _OBJ).map(
    lambda t: [
        f"- {t[0]} {t[1]} [{t[2]}]",
        f"{t[0]} {t[1]}.",
        f"- {t[0]} {t[1]} [{t[2]}] (superseded: {t[0]} {t[4]})",
    ][t[3]].replace("  ", " ")
)
_BLOCK = st.lists(_LINE, max_size=5).map("\n".join)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
@given(_BLOCK, _BLOCK, _BLOCK, st.sampled_from(["profile", "preferences", "entities"]))
@example(  # a restated line folded into an old one that a later line of the bundle closes
    old="- works at Acme [m1]\n- lives in a data engineer at Acme [m1]",
    new_ov="",
    new_ct="- works at Acme [m1]\n- lives in Acme [m1]\n- dislikes a data engineer at Acme [m1]",
    cat="profile",
)
@example(  # a line closed in the bundle whose text the memory holds closed by another line
    old="- works at Acme [m1]\n- works at Acme [m1]",
    new_ov="",
    new_ct="- works at Acme [m1] (superseded: works at Acme)\n- dislikes Acme [m1]",
    cat="profile",
)
def test_merge_idempotent_and_lossless_property(
    old: str, new_ov: str, new_ct: str, cat: str
) -> None:
    existing = bundle("X: y", old, old)
    incoming = bundle("X: z", new_ov, new_ct)
    once = merge(cat, existing, incoming)
    twice = merge(cat, once, incoming)
    assert (twice.abstract, twice.overview, twice.content) == (
        once.abstract,
        once.overview,
        once.content,
    )
    for line in old.splitlines():  # every old fact is still there
        body = line.split(" [")[0].removeprefix("- ").strip()
        assert body in once.overview


def test_the_last_statement_of_a_bundle_wins() -> None:
    """A home said, changed and said again ends where it was said last; the statement it
    replaced is closed and names it."""
    ov = "\n".join(
        [
            "- lives in Berlin [m1]",
            "- lives in Berlin [m2]",
            "- lives in Munich [m3]",
            "- lives in Berlin [m4]",
        ]
    )
    out = merge("profile", bundle("", "- is named Ana [m0]"), bundle("", ov))
    valid, closed = valid_and_closed(out.overview)
    assert valid == ["is named Ana", "lives in Berlin"]
    assert closed == {"lives in Munich": "lives in Berlin"}
    assert "- lives in Berlin [m1, m2, m4]" in out.overview.splitlines()


def test_a_memory_of_thousands_of_lines_merges_in_linear_time() -> None:
    """Repeated lines fold into one line carrying all their refs, and a change closes every
    valid line it replaces, however many lines the memory holds."""
    old = "\n".join(f"- lives in Berlin [m{i}]" for i in range(2000))
    new = "\n".join(
        ["- likes tea [n1]", "- dislikes tea [n2]", "- likes tea [n3]"] * 500
        + ["- lives in Lisbon [n4]"] * 500
    )
    started = time.perf_counter()
    out = merge("profile", bundle("", old), bundle("", new))
    assert time.perf_counter() - started < 5
    lines = out.overview.splitlines()
    assert len(lines) == 2000 + 3  # every old line kept; each new statement once
    assert all(ln.endswith("(superseded: lives in Lisbon)") for ln in lines[:2000])
    assert lines[2000:] == [
        "- dislikes tea [n2] (superseded: likes tea)",
        "- likes tea [n1, n3]",
        "- lives in Lisbon [n4]",
    ]
    assert out.conflicts == ["lives in Berlin -> lives in Lisbon"]
