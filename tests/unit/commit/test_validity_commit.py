"""Profile and preference facts carry their validity through the commit path: a later session
closes the fact it replaces (valid until that session, superseded by the new fact)."""

from __future__ import annotations

from typing import Any

from conftest import commit, request

from ctxpipe.core.enums import CommitStatus
from ctxpipe.core.validity import line_holds, parse_as_of
from ctxpipe.providers.base import run_sync
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.providers.rules.lines import parse_lines

PROFILE = "ctx://acme/users/alice/memories/profile"

BERLIN = [
    {
        "id": "m1",
        "role": "user",
        "created_at": "2023-05-01T10:00:00Z",
        "content": "Hi! I live in Berlin and I work as a nurse.",
    },
    {"id": "m2", "role": "assistant", "content": "Nice to meet you."},
]
LISBON = [
    {
        "id": "n1",
        "role": "user",
        "created_at": "2023-07-01T09:00:00Z",
        "content": "Big news: I moved to Lisbon last week.",
    },
    {"id": "n2", "role": "assistant", "content": "Congratulations on the move!"},
]


def test_a_replaced_fact_is_closed_with_the_session_dates(make_components):
    comp = make_components()
    assert commit(comp, request(BERLIN, commit_id="c1")).status is CommitStatus.SUCCESS
    first = comp.fs.read_node(PROFILE)
    assert all(f.validity.valid_from == "2023-05-01" for f in parse_lines(first.overview))
    assert commit(comp, request(LISBON, session="s2", commit_id="c2")).status is (
        CommitStatus.SUCCESS
    )
    profile = comp.fs.read_node(PROFILE)
    for text in (profile.overview, profile.content):
        facts = parse_lines(text)
        berlin = next(f for f in facts if "Berlin" in f.text)
        lisbon = next(f for f in facts if "Lisbon" in f.text)
        nurse = next(f for f in facts if "nurse" in f.text)
        b, li = berlin.validity, lisbon.validity
        assert (b.valid_from, b.valid_to, b.superseded) == ("2023-05-01", "2023-07-01", lisbon.text)
        assert (li.valid_from, li.valid_to, li.superseded) == ("2023-07-01", "", "")
        assert not berlin.active and lisbon.active
        assert nurse.active and nurse.validity.valid_from == "2023-05-01"  # untouched
    line = next(ln for ln in profile.overview.splitlines() if "Berlin" in ln)
    assert line.endswith(f"(valid from 2023-05-01 until 2023-07-01) (superseded: {lisbon.text})")
    assert not line_holds(line) and line_holds(line, parse_as_of("2023-06-01"))
    assert "Lisbon" in profile.abstract and "Berlin" not in profile.abstract


def test_a_replayed_merge_changes_nothing(make_components):
    comp = make_components()
    commit(comp, request(BERLIN, commit_id="c1"))
    commit(comp, request(LISBON, session="s2", commit_id="c2"))
    before = comp.fs.read_node(PROFILE)
    commit(comp, request(LISBON, session="s2", commit_id="c3"))  # the same session again
    after = comp.fs.read_node(PROFILE)
    assert (after.overview, after.content) == (before.overview, before.content)


class CarelessMergeLLM:
    """The rules LLM, except that its merges read like a model's: the dates of the lines it
    copies are dropped and the replaced fact is only marked superseded."""

    name = "careless"

    def __init__(self) -> None:
        self._inner = RulesLLM()

    async def complete_json(self, prompt_id, variables, schema, ctx=None, usage=None):  # type: ignore[no-untyped-def]
        if prompt_id != "policy.merge_bundle" or variables["category"] != "profile":
            return await self._inner.complete_json(prompt_id, variables, schema, ctx, usage)
        old = parse_lines(variables["existing_overview"])
        new = parse_lines(variables["new_overview"])
        moved = next(n.text for n in new if "Lisbon" in n.text)
        copied = [
            f"- {f.text} [{', '.join(f.refs)}]"
            + (f" (superseded: {moved})" if "Berlin" in f.text else "")
            for f in old
        ]  # the dates dropped, the replaced fact only marked
        lines = "\n".join(copied + [f"- {n.text} [{', '.join(n.refs)}]" for n in new])
        return schema.model_validate(
            {
                "abstract": f"User: {moved}",
                "overview": lines,
                "content": lines,
                "reason": "moved",
                "conflicts": [f"Berlin -> {moved}"],
            }
        )

    def complete_json_sync(self, *a: Any, **k: Any) -> Any:
        return run_sync(self.complete_json(*a, **k))


def test_a_models_merge_is_dated_like_the_rules_one(make_components):
    comp = make_components(llm=CarelessMergeLLM())
    commit(comp, request(BERLIN, commit_id="c1"))
    commit(comp, request(LISBON, session="s2", commit_id="c2"))
    facts = parse_lines(comp.fs.read_node(PROFILE).overview)
    berlin, lisbon, nurse = (
        next(f for f in facts if word in f.text) for word in ("Berlin", "Lisbon", "nurse")
    )
    b, li = berlin.validity, lisbon.validity
    assert (b.valid_from, b.valid_to) == ("2023-05-01", "2023-07-01")
    assert b.superseded == lisbon.text
    assert (li.valid_from, li.valid_to) == ("2023-07-01", "")
    assert nurse.validity.valid_from == "2023-05-01"
