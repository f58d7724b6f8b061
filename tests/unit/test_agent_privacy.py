"""Agent memories in `shared` mode keep the lesson and none of a user's names, numbers or
quotations; in `per_user` mode they are the user's own, verbatim, in the user's space."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from lemminflect import getAllLemmas
from property_examples import examples

from ctxpipe.commit.policies.base import PlanContext
from ctxpipe.commit.policy_router import resolve_target_uri
from ctxpipe.core.enums import AGENT_CATEGORIES, MemoryCategory
from ctxpipe.core.models import CandidateMemory, SessionArchive
from ctxpipe.core.session import Message, RequestContext, ToolUse
from ctxpipe.extraction.agent_privacy import (
    Candidate,
    abstract_text,
    session_words,
    share_agent_memories,
)
from ctxpipe.extraction.extractors import EXTRACTORS
from ctxpipe.providers.base import LLMUsage
from ctxpipe.providers.rules import RulesLLM

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bob_2026-03-20_school_trip.json"


def _bob() -> tuple[list[Message], list[ToolUse], RequestContext]:
    d = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    ctx = RequestContext(
        account_id=d["account_id"],
        user_id=d["user_id"],
        agent_id=d["agent_id"],
        session_id=d["session_id"],
    )
    return [Message(**m) for m in d["messages"]], [ToolUse(**t) for t in d["used_tools"]], ctx


def _extract(messages: list[Message], tools: list[ToolUse], ctx: RequestContext) -> list[Candidate]:
    async def run() -> list[Candidate]:
        out: list[Candidate] = []
        for ex in EXTRACTORS.values():
            r = await ex.extract(
                messages, SessionArchive.model_construct(summary="", key_topics=[]), ctx,
                RulesLLM(), tools=tools, usage=LLMUsage(),
            )  # fmt: skip
            out.extend(r.candidates)
        return out

    return asyncio.run(run())


def _texts(c: Candidate) -> str:
    extra = [getattr(c, "best_for", ""), getattr(c, "common_failures", "")]
    return "\n".join([c.routing_key, c.abstract, c.overview, c.content, *extra])


def test_shared_agent_memories_drop_names_places_and_numbers_but_keep_the_lesson() -> None:
    messages, tools, ctx = _bob()
    raw = _extract(messages, tools, ctx)
    agent_raw = [c for c in raw if c.category in AGENT_CATEGORIES]
    assert {c.category for c in agent_raw} >= {MemoryCategory.CASES, MemoryCategory.SKILLS}
    assert any("Science Museum" in _texts(c) for c in agent_raw)  # what would leak

    shared = share_agent_memories(raw, messages, tools, ctx, "shared")
    agent = [c for c in shared if c.category in AGENT_CATEGORIES]
    for c in agent:
        text = _texts(c)
        for private in ("Science", "Museum", "London", "Leeds", "Okafor", "Bob", "28", "2026"):
            assert not re.search(rf"\b{private}\b", text, re.I), (private, text)
        assert not re.search(r"\[m\d+", text)  # sources are cited in source_refs only
        assert c.source_refs  # ...which are kept, for the memory's history
    case = next(c for c in agent if c.category is MemoryCategory.CASES)
    # the situation and outcome, in dictionary words and the agent's own
    assert "booking form keeps rejecting" in case.content
    assert "phone booking line" in case.content
    skill = next(c for c in agent if c.routing_key == "web-search")
    assert "web_search (tool): 2 calls, 1 succeeded" in skill.abstract
    # memories about the user are the user's: untouched
    assert [c for c in shared if c.category not in AGENT_CATEGORIES] == [
        c for c in raw if c.category not in AGENT_CATEGORIES
    ]


def test_per_user_mode_keeps_agent_memories_verbatim() -> None:
    messages, tools, ctx = _bob()
    raw = _extract(messages, tools, ctx)
    assert share_agent_memories(raw, messages, tools, ctx, "per_user") == raw


def test_per_user_agent_memories_live_in_the_users_space() -> None:
    ctx = RequestContext(account_id="acme", user_id="bob", agent_id="helper", session_id="s1")
    case = CandidateMemory(
        category=MemoryCategory.CASES, owner_scope="agent", routing_key="form-error",
        abstract="a", source_refs=["m1"], confidence=0.9,
    )  # fmt: skip
    usage = LLMUsage()

    def target(mode: str) -> str:
        pc = PlanContext(
            ctx=ctx,
            commit_id="c1",
            llm=RulesLLM(),
            usage=usage,
            agent_memory=mode,  # type: ignore[arg-type]
        )
        return resolve_target_uri(case, pc)

    assert target("shared").startswith("ctx://acme/agents/helper/memories/cases/form-error-")
    assert target("per_user").startswith(
        "ctx://acme/users/bob/memories/agents/helper/cases/form-error-"
    )


def test_quotations_and_message_markers_go_whole() -> None:
    ctx = RequestContext(account_id="a", user_id="u1", agent_id="helper", session_id="s9")
    said = 'My landlord Mr Quibble wrote "Zorvex Ltd owes rent 4411" today'
    msgs = [Message(id="m1", role="user", content=said)]
    words = session_words(msgs, [], ctx)
    out = abstract_text(
        'The user quoted "Zorvex Ltd owes rent 4411" [m1] and asked for help', words
    )
    assert out == "The user quoted … and asked for help"
    # a marker that is not a message id of the session is text, and stays
    assert abstract_text("see [draft notes]", words) == "see [draft notes]"


# ---------------------------------------------------------------- property: nothing leaks
getAllLemmas("word")  # load the lexicon now, not inside a strategy
_SECRET = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=6, max_size=10).filter(
    lambda w: not getAllLemmas(w)
)
_NUMBER = st.integers(min_value=10_000, max_value=99_999_999).map(str)
_FRAMES = [
    "My {0} keeps failing with an error when I open {1}. How do I fix it?",
    "I work with {0} at {1} and the export crashes every time.",
    "Still the same error on {0}, unfortunately.",
    "That worked, thanks! {0} is fine now.",
    "Please call me {0}, my number is {1}.",
]


@settings(max_examples=examples(40), deadline=None)
@given(
    secrets=st.lists(
        st.one_of(_SECRET, _SECRET.map(str.capitalize), _NUMBER),
        min_size=4,
        max_size=8,
        unique=True,
    ),  # fmt: skip
    frames=st.lists(st.sampled_from(_FRAMES), min_size=2, max_size=5),
)
def test_no_word_of_the_users_that_is_not_a_dictionary_word_reaches_a_shared_memory(
    secrets: list[str], frames: list[str]
) -> None:
    ctx = RequestContext(account_id="a", user_id="u1", agent_id="helper", session_id="s1")
    messages: list[Message] = []
    for i, frame in enumerate(frames):
        a, b = secrets[i % len(secrets)], secrets[(i + 1) % len(secrets)]
        messages.append(Message(id=f"m{2 * i + 1}", role="user", content=frame.format(a, b)))
        # the assistant echoes the user's words, as assistants do
        echo = f"Try restarting {a}" + (f"; then set {b} again." if "{1}" in frame else ".")
        messages.append(Message(id=f"m{2 * i + 2}", role="assistant", content=echo))
    tools = [
        ToolUse(name="web_search", success=False, input=f"{secrets[0]} {secrets[-1]} help",
                error=f"not found: {secrets[1]}"),
        ToolUse(name="web_search", success=True, input=f"{secrets[0]} fix",
                output=f"{secrets[2]} docs"),
    ]  # fmt: skip
    shared = share_agent_memories(_extract(messages, tools, ctx), messages, tools, ctx, "shared")
    assert any(c.category in AGENT_CATEGORIES for c in shared)  # the web_search skill at least
    for c in shared:
        if c.category not in AGENT_CATEGORIES:
            continue
        text = _texts(c).casefold()
        for s in secrets:
            assert not re.search(rf"(?<![\w]){re.escape(s.casefold())}(?![\w])", text), (s, text)
