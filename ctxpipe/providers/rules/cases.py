"""Cases: a user problem, the assistant's solution, and the user's verdict.

A USER message that states a problem (an exception name, "fails", "how do I …") opens a case;
the ASSISTANT messages after it are attempts. A USER rejection ("didn't work") marks the
current attempt rejected; a confirmation ("that worked") closes the case with the latest
attempt as the solution — with no attempt standing, the confirmation is the user's own fix
("fixed it by …"). A problem with no attempt is no case (it stays `unresolved`); an
unconfirmed case gets a lower confidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ctxpipe.core.text import normalize_space, tokenize
from ctxpipe.providers.rules.inputs import Msg
from ctxpipe.providers.rules.lines import memory
from ctxpipe.providers.rules.speech import rewrite, verb_lemma
from ctxpipe.providers.rules.text import slugify, strip_code, truncate_words
from ctxpipe.providers.rules.topics import key_topics

EXCEPTION_RE = re.compile(r"\b(?:[A-Za-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception|Fault|Failure))\b")
PROBLEM_RE = re.compile(
    r"(?i)\b(?:error|errors|exception|fail|fails|failed|failing|crash|crashes|crashed|crashing|"
    r"doesn't work|does not work|isn't working|not working|won't|can't get|cannot|unable to|"
    r"broken|bug|issue|stuck|time(?:s|d)? out|timeout|how (?:do|can|should) (?:i|we)|"
    r"how to|keeps? \w+ing|out of memory|oom|traceback|segfault|hangs?|slow)\b"
)
CONFIRM_RE = re.compile(
    r"(?i)\b(?:that worked|it worked|this worked|works now|working now|works perfectly|fixed|"
    r"solved|that did it|did the trick|resolved|problem solved|errors? (?:is|are) gone|"
    r"no more errors?|all good now|success(?:ful)?|(?:it's|it is|all) sorted|all set|"
    r"that helped)\b"
)
REJECT_RE = re.compile(
    r"(?i)\b(?:still (?:getting|failing|fails|broken|crash\w*|the same|seeing|happening|not)|"
    r"didn't (?:work|help)|did not (?:work|help)|doesn't help|no luck|same error|not fixed|"
    r"no difference|made it worse)\b"
)

ADVICE_RE = re.compile(
    r"(?i)\b(?:you (?:should|need to|can|could|might want to)|make sure|"
    r"the fix is|the problem is|instead|set|use|run|add|switch|install)\b"
)


@dataclass
class Case:
    problem: Msg
    problem_text: str
    more: list[Msg] = field(default_factory=list)
    attempts: list[Msg] = field(default_factory=list)
    rejected: list[tuple[Msg, Msg]] = field(default_factory=list)
    confirmation: Msg | None = None

    @property
    def solution(self) -> Msg | None:
        """The latest attempt standing; with none, the user's confirmation is their own fix."""
        return self.attempts[-1] if self.attempts else self.confirmation


def _confirms(text: str) -> bool:
    return bool(CONFIRM_RE.search(text)) and not REJECT_RE.search(text)


def problem_sentences(msg: Msg) -> list[str]:
    """The sentences of `msg` that state a problem, not that it is gone."""
    said = (s for s in msg.sentences if not _confirms(s))
    return [s for s in said if PROBLEM_RE.search(s) or EXCEPTION_RE.search(s)]


def _solution_summary(msg: Msg, max_words: int = 30) -> str:
    scored: list[tuple[float, int, str]] = []
    for i, s in enumerate(msg.sentences):
        first = (tokenize(s) or [""])[0]
        imperative = verb_lemma(first) == first or first in {"then", "also"}
        code = "`" in s or bool(re.search(r"\w+\.\w+\(|--\w+|=\d", s))
        advice = bool(ADVICE_RE.search(s))
        score = 2.0 * imperative + advice + 0.5 * code - 2 * s.endswith("?")
        scored.append((score, i, s))
    best = sorted(scored, key=lambda x: (-x[0], x[1]))[:2]
    chosen = [s for score, _, s in sorted(best, key=lambda x: x[1]) if score > 0]
    chosen = chosen or msg.sentences[:1]
    return truncate_words(" ".join(chosen), max_words)


def _problem_phrase(problem: str) -> str:
    """'How do I check X?' → 'How to check X'; statements → third person."""
    text = re.sub(r"\b(how) (?:do|can|should|would) (?:i|we|you) ", r"\1 to ", problem, flags=re.I)
    text = re.sub(r"\?(?=\s|$)", "", text)
    return rewrite(text, "the user").text


def _slug(problem: str) -> str:
    """The exception the problem names, then its first topic words."""
    exc = EXCEPTION_RE.search(problem)
    name = [exc.group(1).lower()] if exc else []
    words = [w for w in key_topics(problem, 5) if w not in name]
    return slugify(" ".join([*name, *words]), max_words=4) if name or words else "problem"


def find_cases(messages: list[Msg]) -> list[Case]:
    cases: list[Case] = []
    current: Case | None = None
    for msg in messages:
        if msg.role == "assistant" and current is not None:
            current.attempts.append(msg)
            continue
        if not msg.is_user:
            continue
        if current is not None and current.attempts and REJECT_RE.search(msg.content):
            current.rejected.append((current.attempts.pop(), msg))
            continue
        if current is not None and _confirms(msg.content):
            current.confirmation, current = msg, None
        problems = problem_sentences(msg)
        if problems:
            if current is not None and not current.attempts and not current.rejected:
                current.more.append(msg)  # the user is still describing the same problem
                current.problem_text += " " + " ".join(problems)
                continue
            current = Case(msg, " ".join(problems))
            cases.append(current)
    return [case for case in cases if case.solution is not None]  # an attempt, or the user's fix


def case_memory(case: Case) -> dict[str, Any]:
    sol, ok = case.solution, case.confirmation
    assert sol is not None
    problem_short = truncate_words(case.problem_text, 25)
    solution_short = _solution_summary(sol)
    told = [case.problem, *case.more]  # the messages the memory cites, in order
    overview = [f"- problem: {problem_short} [{', '.join(m.id for m in told)}]"]
    content = [f"Problem [{m.id}]: {normalize_space(strip_code(m.content))}" for m in told]
    for attempt, verdict in case.rejected:
        said = f'(user: "{truncate_words(verdict.sentences[0], 12)}" [{verdict.id}])'
        overview.append(
            f"- rejected attempt: {_solution_summary(attempt, 20)} [{attempt.id}] {said}"
        )
        content.append(f"Rejected attempt [{attempt.id}]: {normalize_space(attempt.content)}")
        content.append(f"User feedback [{verdict.id}]: {normalize_space(verdict.content)}")
        told += [attempt, verdict]
    overview.append(f"- solution: {solution_short} [{sol.id}]")
    content.append(f"Solution [{sol.id}]: {sol.content.strip()}")
    told.append(sol)
    if ok is None:
        overview.append("- outcome: not confirmed in the session")
    else:
        quote = next((s for s in ok.sentences if CONFIRM_RE.search(s)), ok.sentences[0])
        overview.append(
            f'- outcome: confirmed by the user: "{truncate_words(quote, 15)}" [{ok.id}]'
        )
        content.append(f"Outcome [{ok.id}]: {normalize_space(quote)}")
        told.append(ok)
    abstract = f"{_problem_phrase(problem_short)} → {truncate_words(solution_short, 20)}"
    conf = 0.65 if ok is None else 0.9  # a case the user confirmed is surer
    texts = ("\n".join(overview), "\n\n".join(content))
    refs = [m.id for m in told]
    return memory("cases", _slug(case.problem_text), abstract, *texts, conf, refs=refs)
