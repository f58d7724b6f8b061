"""`policy.merge_bundle` with the rules provider: keep, add, supersede, stay idempotent."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxpipe.core.llm_schemas import ExtractionOutput, MergeOutput
from ctxpipe.providers.rules import RulesLLM

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


def test_job_change_supersedes_and_keeps_everything() -> None:
    before = profile_of(
        "My name is Priya and I work at Northwind Traders as a backend developer.",
        "I live in Porto. I mostly use Go and Postgres.",
    )
    after = profile_of("Big news: I joined Contoso as an engineering manager last week.")
    out = merge("profile", before, after)
    ov = [ln for ln in out.overview.splitlines() if ln]
    old = "- works as a backend developer at Northwind Traders [m1]"
    assert f"{old} (superseded: works as an engineering manager at Contoso)" in ov
    assert "- works as an engineering manager at Contoso [m1]" in ov
    assert "- lives in Porto [m2]" in ov and "- uses Go and Postgres [m2]" in ov
    assert "- is named Priya [m1]" in ov
    assert out.conflicts == [
        'works as: "a backend developer at Northwind Traders" → "an engineering manager at Contoso"'
    ]
    assert out.abstract.startswith("Priya: works as an engineering manager at Contoso")
    assert "backend developer" not in out.abstract
    # L2 keeps the user's own words for both jobs
    assert "I work at Northwind Traders as a backend developer" in out.content
    assert "I joined Contoso as an engineering manager" in out.content
    assert "1 conflict" in out.reason


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


def test_new_facts_are_added_without_conflict() -> None:
    old = bundle("Languages preferences: likes Rust", "- likes Rust [a1]")
    new = bundle("Languages preferences: likes Go", "- likes Go [b4]\n- uses Zig at work [b5]")
    out = merge("preferences", old, new)
    assert out.overview.splitlines() == [
        "- likes Rust [a1]",
        "- likes Go [b4]",
        "- uses Zig at work [b5]",
    ]
    assert out.conflicts == []
    assert out.abstract == "Languages preferences: likes Rust; likes Go; uses Zig at work"


def test_opposite_polarity_is_a_conflict() -> None:
    old = bundle("Food preferences: dislikes cilantro", "- dislikes cilantro [a3]")
    new = bundle("Food preferences: likes cilantro", "- likes cilantro now [b1]")
    out = merge("preferences", old, new)
    assert "- dislikes cilantro [a3] (superseded: likes cilantro now)" in out.overview
    assert len(out.conflicts) == 1 and "dislikes" in out.conflicts[0]
    assert out.abstract == "Food preferences: likes cilantro now"


def test_choice_of_the_same_kind_is_a_conflict() -> None:
    old = bundle(
        "Editor preferences: would rather use Neovim than VS Code",
        "- would rather use Neovim than VS Code [m9]",
    )
    new = bundle(
        "Editor preferences: would rather use Helix than Neovim",
        "- would rather use Helix than Neovim [m5]",
    )
    out = merge("preferences", old, new)
    assert "(superseded: would rather use Helix than Neovim)" in out.overview
    assert out.abstract == "Editor preferences: would rather use Helix than Neovim"


def test_entity_narrative_accumulates() -> None:
    old = bundle(
        "Hannah (person, the user's sister): The user's sister Hannah lives in Porto.",
        "- type: person\n- relation: the user's sister\n- The user's sister Hannah lives in "
        "Porto. [t3]",
    )
    new = bundle(
        "Hannah (person, the user's sister): Hannah is a dentist.",
        "- type: person\n- Hannah is a dentist. [x2]",
    )
    out = merge("entities", old, new)
    ov = out.overview.splitlines()
    assert "- The user's sister Hannah lives in Porto. [t3]" in ov
    assert "- Hannah is a dentist. [x2]" in ov
    assert ov.count("- type: person") == 1
    assert out.abstract.startswith("Hannah (person, the user's sister): ")
    assert "dentist" in out.abstract and "Porto" in out.abstract


def test_single_valued_keys_and_free_text() -> None:
    old = bundle("Event", "- status: planned\n- date: 2026-06-06", "Wedding planned in Porto.")
    new = bundle("Event", "- status: happened", "Wedding planned in Porto.\nIt rained.")
    out = merge("events", old, new)
    assert "- status: planned (superseded: status: happened)" in out.overview
    assert out.content.splitlines() == ["Wedding planned in Porto.", "It rained."]


_PRED = st.sampled_from(
    ["works as", "works at", "lives in", "likes", "dislikes", "prefers", "uses", "status:", ""]
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


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_BLOCK, _BLOCK, _BLOCK, st.sampled_from(["profile", "preferences", "entities"]))
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


def test_a_line_said_again_after_a_change_wins_again() -> None:
    """Within one bundle the later line wins each time: a home said, changed and said again
    ends where it was said last, and each earlier line names the line that replaced it."""
    ov = "\n".join(
        [
            "- lives in Berlin [m1]",
            "- lives in Berlin [m2]",
            "- lives in Munich [m3]",
            "- lives in Berlin [m4]",
            "- lives in Berlin [m5]",
        ]
    )
    out = merge("profile", bundle("", "- is named Ana [m0]"), bundle("", ov))
    lines = out.overview.splitlines()
    assert "- lives in Berlin [m1, m2] (superseded: lives in Munich)" in lines
    assert "- lives in Munich [m3] (superseded: lives in Berlin)" in lines
    assert "- lives in Berlin [m4, m5]" in lines
    assert sum("lives in" in ln for ln in lines) == 3


def test_a_memory_of_thousands_of_lines_merges_each_line_once() -> None:
    """Repeated lines fold into one line carrying all their refs, and a contradiction closes
    every active line it replaces, however many lines the memory holds."""
    old = "\n".join(f"- lives in Berlin [m{i}]" for i in range(2000))
    new = "\n".join(
        ["- likes tea [n1]", "- dislikes tea [n2]", "- likes tea [n3]"] * 500
        + ["- lives in Lisbon [n4]"] * 500
    )
    out = merge("profile", bundle("", old), bundle("", new))
    lines = out.overview.splitlines()
    assert len(lines) == 2000 + 4  # every old line kept; each new fact once
    assert all(ln.endswith("(superseded: lives in Lisbon)") for ln in lines[:2000])
    assert lines[2000:] == [
        "- likes tea [n1, n3] (superseded: dislikes tea)",
        "- dislikes tea [n2] (superseded: likes tea)",
        "- likes tea [n3]",
        "- lives in Lisbon [n4]",
    ]
    assert out.conflicts == ['lives in: "Berlin" → "Lisbon"']
