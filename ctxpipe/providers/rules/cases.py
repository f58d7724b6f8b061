"""Cases: a user problem, the assistant's solution, and the user's verdict.

A USER message that states a problem (an exception name, "fails", "how do I …") opens a case;
the ASSISTANT messages after it are solution attempts. A USER rejection ("didn't work") keeps
the current attempt as rejected; a USER confirmation ("that worked") closes the case with the
latest attempt as the solution, or with the user's own fix ("fixed it by …"). Unconfirmed cases
get a lower confidence; a problem with no attempt is no case (it stays `unresolved`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ctxpipe.core.text import STOPWORDS, normalize_space, tokenize
from ctxpipe.providers.rules.inputs import Msg
from ctxpipe.providers.rules.speech import rewrite, verb_lemma
from ctxpipe.providers.rules.text import slugify, strip_code, truncate_words

EXCEPTION_RE = re.compile(r"\b(?:[A-Za-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception|Fault|Failure))\b")
PROBLEM_RE = re.compile(
    r"\b(?:error|errors|exception|fail|fails|failed|failing|crash|crashes|crashed|crashing|"
    r"doesn't work|does not work|isn't working|not working|won't|can't get|cannot|unable to|"
    r"broken|bug|issue|stuck|time(?:s|d)? out|timeout|how (?:do|can|should) (?:i|we)|"
    r"how to|keeps? \w+ing|out of memory|oom|traceback|segfault|hangs?|slow)\b",
    re.I,
)
CONFIRM_RE = re.compile(
    r"\b(?:that worked|it worked|this worked|works now|working now|works perfectly|fixed|"
    r"solved|that did it|did the trick|resolved|problem solved|errors? (?:is|are) gone|"
    r"no more errors?|all good now|success(?:ful)?|(?:it's|it is|all) sorted|all set|"
    r"that helped)\b",
    re.I,
)
REJECT_RE = re.compile(
    r"\b(?:still (?:getting|failing|fails|broken|crash\w*|the same|seeing|happening|not)|"
    r"didn't (?:work|help)|did not (?:work|help)|doesn't help|no luck|same error|not fixed|"
    r"no difference|made it worse)\b",
    re.I,
)
SELF_FIX_RE = re.compile(
    r"\b(?:fixed|solved) (?:it|this|that) by\b|\bturned out\b|"
    r"\bthe (?:fix|solution) was\b",
    re.I,
)
ADVICE_RE = re.compile(
    r"\b(?:you (?:should|need to|can|could|might want to)|make sure|"
    r"the fix is|the problem is|instead|set|use|run|add|switch|install)\b",
    re.I,
)


@dataclass
class Case:
    problem: Msg
    problem_text: str
    more: list[Msg] = field(default_factory=list)
    attempts: list[Msg] = field(default_factory=list)
    rejected: list[tuple[Msg, Msg]] = field(default_factory=list)
    confirmation: Msg | None = None
    self_fix: bool = False

    @property
    def solution(self) -> Msg | None:
        if self.self_fix and self.confirmation is not None:
            return self.confirmation
        return self.attempts[-1] if self.attempts else None


def problem_sentences(msg: Msg) -> list[str]:
    out = []
    for s in msg.sentences:
        if CONFIRM_RE.search(s) and not REJECT_RE.search(s):
            continue
        if PROBLEM_RE.search(s) or EXCEPTION_RE.search(s):
            out.append(s)
    return out


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
    return truncate_words(normalize_space(" ".join(chosen)), max_words)


def _problem_phrase(problem: str) -> str:
    """'How do I check X?' → 'How to check X'; statements → third person."""
    text = re.sub(r"\b(how) (?:do|can|should|would) (?:i|we|you) ", r"\1 to ", problem, flags=re.I)
    text = re.sub(r"\?(?=\s|$)", "", text)
    return rewrite(text, "the user").text


def _slug(problem: str) -> str:
    exc = EXCEPTION_RE.search(problem)
    toks = [t for t in tokenize(problem) if t not in STOPWORDS and len(t) > 2 and t.isascii()]
    skip = {"keeps", "getting", "still", "how", "error", "exception"}
    words = [t for t in toks if t not in skip and "." not in t and ":" not in t]
    if exc:
        name = exc.group(1).lower()
        words = [w for w in words if w != name]
        return slugify(" ".join([name, *words[:3]]), max_words=4)
    return slugify(" ".join(words[:4]), max_words=4) if words else "problem"


def find_cases(messages: list[Msg]) -> list[Case]:
    cases: list[Case] = []
    current: Case | None = None
    for msg in messages:
        if msg.is_assistant and current is not None:
            current.attempts.append(msg)
            continue
        if not msg.is_user:
            continue
        text = msg.content
        if current is not None and current.attempts and REJECT_RE.search(text):
            current.rejected.append((current.attempts.pop(), msg))
            continue
        if current is not None and CONFIRM_RE.search(text) and not REJECT_RE.search(text):
            current.confirmation = msg
            current.self_fix = bool(SELF_FIX_RE.search(text)) and not current.attempts
            current = None
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
    sol = case.solution
    assert sol is not None
    problem_short = truncate_words(normalize_space(case.problem_text), 25)
    solution_short = _solution_summary(sol)
    refs = [case.problem.id] + [m.id for m in case.more]
    overview = [f"- problem: {problem_short} [{', '.join(refs)}]"]
    content = [
        f"Problem [{m.id}]: {normalize_space(strip_code(m.content))}"
        for m in [case.problem, *case.more]
    ]
    for attempt, verdict in case.rejected:
        overview.append(
            f"- rejected attempt: {_solution_summary(attempt, 20)} [{attempt.id}] "
            f'(user: "{truncate_words(verdict.sentences[0], 12)}" [{verdict.id}])'
        )
        content.append(f"Rejected attempt [{attempt.id}]: {normalize_space(attempt.content)}")
        content.append(f"User feedback [{verdict.id}]: {normalize_space(verdict.content)}")
        refs += [attempt.id, verdict.id]
    overview.append(f"- solution: {solution_short} [{sol.id}]")
    content.append(f"Solution [{sol.id}]: {sol.content.strip()}")
    if sol.id not in refs:
        refs.append(sol.id)
    conf = 0.65
    if case.confirmation is not None:
        quote = next(
            (s for s in case.confirmation.sentences if CONFIRM_RE.search(s)),
            case.confirmation.sentences[0],
        )
        overview.append(
            f'- outcome: confirmed by the user: "{truncate_words(quote, 15)}" '
            f"[{case.confirmation.id}]"
        )
        content.append(f"Outcome [{case.confirmation.id}]: {normalize_space(quote)}")
        if case.confirmation.id not in refs:
            refs.append(case.confirmation.id)
        conf = 0.9
    else:
        overview.append("- outcome: not confirmed in the session")
    return {
        "category": "cases",
        "routing_key": _slug(case.problem_text),
        "abstract": f"{_problem_phrase(problem_short)} → {truncate_words(solution_short, 20)}",
        "overview": "\n".join(overview),
        "content": "\n\n".join(content),
        "confidence": conf,
        "source_refs": refs,
    }
