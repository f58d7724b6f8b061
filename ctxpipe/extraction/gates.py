"""The extractors' gates: whether a session's messages can hold anything for an extractor,
decided from the text alone (`ctxpipe.extraction.signals`) before its LLM call is paid for.

Each function returns the reason to skip, or None when the extractor must run. They are
conservative: they skip only when no message shows a signal of the extractor's categories,
and a message in a language they cannot read always counts as a signal. The same on every LLM
provider (the point is to save paid calls).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from ctxpipe.core.session import Message, ToolUse
from ctxpipe.extraction import signals as sig

# a problem stated or a way asked for: what a solved case starts from
_PROBLEM_RE = re.compile(
    r"\b(?:[A-Z]\w*(?:Error|Exception|Fault|Failure)|errors?|exceptions?|fail\w*|crash\w*|"
    r"bugs?|broken|break\w*|issues?|problems?|trouble|stuck|wrong|time[sd]? ?out|timeouts?|"
    r"traceback|segfault|hang\w*|slow\w*|freez\w*|leak\w*|can['’]?t|cannot|couldn['’]?t|"
    r"unable|won['’]?t|doesn['’]?t|didn['’]?t|isn['’]?t|not working|how (?:do|can|should|"
    r"would|to)|what['’]?s the (?:best )?way|is there a way|help|fix\w*|debug\w*|solv\w*|"
    r"workaround|figure out|oom|out of memory|keep(?:s|ing)? \w+ing)\b",
    re.I,
)
# a routine, a rule of thumb, or a step list: what a pattern is made of
_ROUTINE_RE = re.compile(
    r"\b(?:every time|each time|whenever|usually|typically|normally|generally|as a rule|"
    r"routine|workflow|process|procedure|habit|checklist|recipe|rule of thumb|tip|trick|"
    r"best practice|steps?|step by step|first\b.*\b(?:then|next|finally|after that))\b",
    re.I | re.S,
)
# a standing rule ("we always squash-merge", "Never deploy on Fridays", "make sure to …")
_RULE_RE = re.compile(r"\b(?:always|never|make sure|remember to)\b", re.I)
_LIST_LINE_RE = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+\S", re.M)
_CODE_RE = re.compile(r"```|`[^`\n]+`|^\s*[$>] \S", re.M)


def _tool_used(messages: list[Message], tools: list[ToolUse]) -> bool:
    return bool(tools) or any(m.role == "tool" for m in messages)


def _user(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "user" and m.content.strip()]


def _asks_about_user(message: Message) -> bool:
    """An assistant question put to the user ("Where are you based?")."""
    return message.role == "assistant" and any(
        s.rstrip().endswith("?") and sig.second_person(s) for s in sig.sentences(message.content)
    )


def _user_sentences(messages: list[Message]) -> Iterator[tuple[bool, str]]:
    """(answers a question about the user, sentence) for each user sentence that holds a
    content word."""
    asked = False
    for m in messages:
        if m.role != "user":
            asked = _asks_about_user(m) or (asked and m.role != "assistant")
            continue
        for s in sig.sentences(m.content):
            yield asked, s
        asked = False


def _any_user_signal(messages: list[Message], signal: Callable[[str, bool], bool]) -> bool:
    """Whether a user message is unreadable or one of its sentences shows `signal`."""
    if any(not sig.readable(m.content) for m in _user(messages)):
        return True
    return any(signal(s, answered) for answered, s in _user_sentences(messages))


def _no_user(messages: list[Message]) -> str | None:
    return None if _user(messages) else "no message from the user"


def profile_gate(messages: list[Message], tools: list[ToolUse]) -> str | None:
    """Profile facts are what the user says of themself: a first-person word, a subjectless
    statement ("Using Python at work"), a fragment ("Nurse, ten years"), or an answer to a
    question about them."""
    if reason := _no_user(messages):
        return reason

    def about_self(s: str, answered: bool) -> bool:
        return answered or sig.first_person(s) or sig.subjectless(s) or sig.verbless(s)

    if _any_user_signal(messages, about_self):
        return None
    return (
        "no user message speaks of the user (no first-person word, no subjectless statement "
        "or fragment, no answer to a question about them)"
    )


def preferences_gate(messages: list[Message], tools: list[ToolUse]) -> str | None:
    """Preferences are the user's tastes and instructions: as for the profile (a request is
    a subjectless sentence: "Keep it short"; a correction may be a fragment: "Metric units"),
    plus a sentence addressed to the agent ("you", "your")."""
    if reason := _no_user(messages):
        return reason

    def taste(s: str, answered: bool) -> bool:
        return (
            answered
            or sig.first_person(s)
            or sig.subjectless(s)
            or sig.verbless(s)
            or sig.second_person(s)
        )

    if _any_user_signal(messages, taste):
        return None
    return (
        "no user message states a taste or an instruction (no first-person word, no request "
        "or fragment, nothing said to the agent, no answer to a question about them)"
    )


def entity_event_gate(messages: list[Message], tools: list[ToolUse]) -> str | None:
    """Entities and events need a name, a time or a number, or something that happened to
    the user (first person, a subjectless statement); a tool's output may bring any of them."""
    if _tool_used(messages, tools):
        return None
    if reason := _no_user(messages):
        return reason

    def concrete(s: str, answered: bool) -> bool:
        return sig.names(s) or sig.times_or_numbers(s) or sig.first_person(s) or sig.subjectless(s)

    if _any_user_signal(messages, concrete):
        return None
    return (
        "no user message names anything or anyone, a time or a number, or tells what "
        "happened to the user, and no tool was used"
    )


def procedure_gate(messages: list[Message], tools: list[ToolUse]) -> str | None:
    """Cases need a problem or a how-to question answered by the assistant; patterns a
    routine, a rule, a step list or code; skills a tool use."""
    if _tool_used(messages, tools):
        return None
    problem = False
    for m in messages:
        text = m.content
        if not sig.readable(text) or _ROUTINE_RE.search(text) or _RULE_RE.search(text):
            return None
        if len(_LIST_LINE_RE.findall(text)) >= 2 or _CODE_RE.search(text):
            return None
        if m.role == "user" and _PROBLEM_RE.search(text):
            problem = True
        elif m.role == "assistant" and problem:
            return None
    return (
        "no tool use, no problem or how-to question answered by the assistant, no routine, "
        "rule, step list or code"
    )
