"""The extractors' LLM-free gates: what each one must skip, and what it must never skip."""

from __future__ import annotations

from typing import Any

import pytest

from ctxpipe.core.session import Message, ToolUse
from ctxpipe.extraction import signals
from ctxpipe.extraction.extractors import EXTRACTORS


def chat(*turns: str, tools: list[ToolUse] | None = None) -> dict[str, Any]:
    """Alternating user / assistant turns, the user first."""
    roles = ("user", "assistant")
    messages = [
        Message(id=f"t{i}", role=roles[i % 2], content=text)  # type: ignore[arg-type]
        for i, text in enumerate(turns)
    ]
    return {"messages": messages, "tools": tools or []}


def skipped(extractor: str, session: dict[str, Any]) -> str | None:
    return EXTRACTORS[extractor].skip_reason(session["messages"], session["tools"])


SMALL_TALK = chat("hey there", "Hello! What can I do for you?", "nothing, ok thanks!", "Bye!")
TRIVIA = chat(
    "what is the boiling point of water at sea level?",
    "100 degrees Celsius.",
    "and on top of a high mountain?",
    "Lower: about 70 degrees on the summit of Everest.",
)


# ------------------------------------------------------------------ profile
@pytest.mark.parametrize(
    "session",
    [
        SMALL_TALK,
        chat("Which novel has a captain who hunts a whale?", "Moby-Dick."),
        chat("Is the museum open late on holidays?", "It closes at six on holidays."),
    ],
    ids=["small-talk", "question-about-a-book", "question-about-a-museum"],
)
def test_profile_skips_sessions_where_the_user_says_nothing_of_themself(session):
    reason = skipped("profile", session)
    assert reason is not None and "first-person" in reason


@pytest.mark.parametrize(
    "session",
    [
        chat("i teach chemistry at a secondary school", "Which year groups?"),
        chat("Our team ships on Fridays.", "Got it."),
        chat("Started a new job at the harbour authority last month.", "Congrats!"),
        chat("Hi!", "Welcome! Where are you based?", "Rotterdam, by the port."),
        chat("Nurse, fifteen years, night shifts mostly.", "Thanks for sharing."),
        chat("Pouvez-vous noter que je suis infirmière à Lyon ?", "C'est noté."),
    ],
    ids=[
        "lower-case-i",
        "plural-first-person",
        "subjectless",
        "answer",
        "fragment",
        "another-language",
    ],
)
def test_profile_runs_when_the_user_may_speak_of_themself(session):
    assert skipped("profile", session) is None


def test_a_session_without_a_user_message_is_skipped_with_that_reason():
    only_agent = {
        "messages": [Message(id="a1", role="assistant", content="Reminder: backups run at 2am.")],
        "tools": [],
    }
    for name in ("profile", "preferences", "entity_event"):
        assert skipped(name, only_agent) == "no message from the user"


# ------------------------------------------------------------------ preferences
def test_preferences_skip_questions_that_hold_no_taste_or_instruction():
    assert skipped("preferences", TRIVIA) is not None
    assert skipped("preferences", SMALL_TALK) is not None


@pytest.mark.parametrize(
    "session",
    [
        chat("Keep your answers under five lines.", "Will do."),
        chat("Never paste secrets into the chat log.", "Understood."),
        chat("Could you write the summary in Spanish?", "Sure."),
        chat("Metric units, not imperial!", "Noted."),
        chat("Tabs are fine, but I find two-space indents easier to read.", "Noted."),
    ],
    ids=["imperative", "prohibition", "asked-of-the-agent", "fragment", "first-person"],
)
def test_preferences_run_on_any_request_or_taste(session):
    assert skipped("preferences", session) is None


# ------------------------------------------------------------------ entities and events
def test_entity_event_skips_when_nothing_is_named_dated_counted_or_told():
    session = chat("why is the sky blue?", "Rayleigh scattering of sunlight.", "neat, thanks")
    reason = skipped("entity_event", session)
    assert reason is not None and "names anything" in reason
    assert skipped("entity_event", SMALL_TALK) is not None


@pytest.mark.parametrize(
    "session",
    [
        chat("is the Riverside clinic any good?", "It has good reviews."),
        chat("the invoice is due tomorrow", "I will remind you."),
        chat("the shipment had 40 crates", "Noted."),
        chat("the shipment had forty crates", "Noted."),
        chat("Zanzibar sounds lovely for a honeymoon", "It is."),
        chat("finally got my visa", "Great news!"),
    ],
    ids=["name", "relative-date", "digits", "numeral", "name-opening", "first-person-event"],
)
def test_entity_event_runs_on_names_times_numbers_and_what_happened(session):
    assert skipped("entity_event", session) is None


def test_entity_event_runs_whenever_a_tool_was_used():
    session = chat("what is on the agenda?", "Here it is.")
    assert skipped("entity_event", session) is not None
    with_tool = chat(
        "what is on the agenda?", "Here it is.", tools=[ToolUse(name="calendar", output="…")]
    )
    assert skipped("entity_event", with_tool) is None


# ------------------------------------------------------------------ procedure
def test_procedure_skips_a_chat_with_no_problem_tool_routine_or_steps():
    reason = skipped("procedure", TRIVIA)
    assert reason is not None and "no tool use" in reason
    assert skipped("procedure", SMALL_TALK) is not None


def test_procedure_needs_the_assistant_to_answer_the_problem():
    unanswered = chat("my laptop fan is loud and the build is slow")
    assert skipped("procedure", unanswered) is not None
    answered = chat("my laptop fan is loud and the build is slow", "Close the browser tabs.")
    assert skipped("procedure", answered) is None


@pytest.mark.parametrize(
    "session",
    [
        chat("How do I rotate the access logs?", "Use logrotate with a weekly rule."),
        chat("The export crashes with a KeyError.", "Check the column names."),
        chat("whenever we release, we tag the commit and bump the version", "Good practice."),
        chat("Here is what we do.", "Sounds good.", "- back up the db\n- run the migration"),
        chat("Run `make check` before pushing.", "Okay."),
        chat("Always lock the van before lunch.", "Sensible."),
    ],
    ids=["how-to", "exception", "routine", "step-list", "code", "rule"],
)
def test_procedure_runs_on_cases_patterns_and_rules(session):
    assert skipped("procedure", session) is None


def test_procedure_runs_whenever_a_tool_was_used():
    session = chat("thanks", tools=[ToolUse(name="web_search", input="weather")])
    assert skipped("procedure", session) is None


# ------------------------------------------------------------------ the signals themselves
def test_text_in_another_language_is_never_judged():
    assert not signals.readable("Ich wohne seit zwei Jahren in Graz")
    assert not signals.readable("我住在上海")
    assert signals.readable("the cat sat on the mat")
    session = chat("Ich wohne seit zwei Jahren in Graz", "Schön!")
    for name in EXTRACTORS:
        assert skipped(name, session) is None, name


def test_sentences_of_filler_hold_nothing():
    assert not signals.has_content("Ok, sounds good, thanks!")
    assert signals.has_content("Ok, the boiler is fixed.")
    assert signals.has_content("see you at 5")


def test_subjectless_openings():
    assert signals.subjectless("Using Postgres for the ledger.")
    assert signals.subjectless("Please don't reply in bullet points.")
    assert not signals.subjectless("Looks fine to me.")  # a third-person "-s": it looks
    assert not signals.subjectless("The build is green.")


def test_verbless_fragments():
    assert signals.verbless("Short answers, no emojis.")
    assert not signals.verbless("Short answers are better.")
    assert not signals.verbless("and on top of a high mountain?")  # a question asks, not tells
