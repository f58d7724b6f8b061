"""`retrieval.intent_analysis`: turn a user query into 0-5 typed retrieval queries.

- chit-chat (greetings, thanks, acknowledgements, nothing but stopwords) → no queries;
- compound questions are split at sentence ends, ';', 'and also' / ', also' and at 'and' / 'or'
  when what follows starts a new question (wh-word, auxiliary verb or request verb);
- pronouns (he/she/him/her/his/it/its/they/them/their) are resolved against the names in the
  recent messages (most recent first; people for he/she, non-people for it);
- context_type: `skill` for "how do I use X", tool words or snake_case tool names; `resource`
  for documents (docs, spec, readme, wiki, paper…); else `memory`;
- priority: 1 (highest) for the first sub-query, then 2, 3… in the order they were asked.
"""

from __future__ import annotations

import re
from functools import reduce
from typing import Any

from ctxpipe.core.text import STOPWORDS, content_tokens, normalize_space
from ctxpipe.providers.rules.inputs import load_messages
from ctxpipe.providers.rules.speech import verb_lemma
from ctxpipe.providers.rules.statements import names_in
from ctxpipe.providers.rules.text import is_chitchat, split_sentences

STARTERS = (
    r"what|what's|where|when|who|whom|whose|why|how|which|do|does|did|is|are|was|were|can|"
    r"could|should|would|will|have|has|remind|tell|show|list|find|give|explain|summari[sz]e"
)
SPLIT_RE = re.compile(
    rf"(?i);\s*|,?\s+and also\s+|,\s*also,?\s+|\s+also,\s+"
    rf"|,?\s+(?:and|or|plus)\s+(?=(?:{STARTERS})\b)"
)
SKILL_RE = re.compile(
    r"(?i)\bhow (?:do|can|should|would) (?:i|we|you) (?:use|run|call|invoke|configure)\b|"
    r"\bhow to (?:use|run|call|invoke|configure)\b|\busage of\b|\b(?:tool|tools|skill|skills|"
    r"command|commands|cli|api|plugin|script)\b|\b[a-z]+_[a-z_]+\b"
)
RESOURCE_RE = re.compile(
    r"(?i)\b(?:docs?|documentation|files?|spec|specs|specification|readme|manual|guide|pdf|wiki|"
    r"page|paper|papers|reference|handbook|runbook|design doc|notes|slides)\b"
)
INTENTS = {  # the first label whose words a memory query has
    "recall_preference": r"prefer\w*|like|likes|favou?rite|hate|style|rather",
    "recall_profile": r"my (?:job|role|name|title|stack)|where do i (?:live|work)|who am i|"
    r"about me",
    "recall_event": r"when|what happened|last (?:week|time|month)|yesterday|date|did (?:i|we)",
    "recall_solution": r"fix|fixed|error|issue|bug|problem|solve|solution|fail\w*",
}
_INTENT_RES = {label: re.compile(rf"\b(?:{words})\b", re.I) for label, words in INTENTS.items()}
PRONOUNS = {
    "he": "person", "him": "person", "his": "person", "she": "person", "her": "person",
    "it": "thing", "its": "thing", "they": "any", "them": "any", "their": "any",
}  # fmt: skip
_JOINED_RE = re.compile(r"^(?:and|also|plus|or)\b[\s,]*", re.I)
_PRONOUN_RE = re.compile(rf"\b({'|'.join(PRONOUNS)})\b(\s+\w+)?", re.I)
_KIN_BEFORE = re.compile(r"\b(?:my|our)\s+[a-z-]+(?:\s+[a-z-]+)?,?\s*$", re.I)


def split_compound(query: str) -> list[str]:
    """The questions of a query: its sentences cut at `SPLIT_RE`, without the conjunction that
    opened each."""
    pieces = (p.strip(" ,") for s in split_sentences(query) or [query] for p in SPLIT_RE.split(s))
    return [p for p in (_JOINED_RE.sub("", p).strip(" ,;") for p in pieces) if p]


def recent_names(recent: Any) -> dict[str, str]:
    """name → 'person' | 'thing' from the recent messages, most recent first."""
    said = (s for msg in reversed(load_messages(recent)) for s in reversed(msg.sentences))
    return reduce(_add_names, said, {})


def _is_person(before: str, after: str) -> bool:
    """A name is a person when a kin word of the speaker stands before it ("my sister
    Hannah"), it owns something ("Hannah's"), or it is the subject of an inflected verb other
    than be, have and do ("Hannah said …", "Hannah lives …")."""
    if _KIN_BEFORE.search(before) or after.startswith("'s"):
        return True
    word = (re.findall(r"^\s*([a-z]+)", after) or [""])[0]
    return verb_lemma(word) not in (None, word, "be", "have", "do")


def _add_names(found: dict[str, str], sentence: str) -> dict[str, str]:
    """Add the sentence's names (a 'person' cue anywhere upgrades an earlier entry)."""
    for name in reversed(names_in(sentence)):
        st = sentence.find(name)
        if _is_person(sentence[:st], sentence[st + len(name) :]):
            found[name] = "person"
        found.setdefault(name, "thing")
    return found


def resolve_pronouns(text: str, names: dict[str, str]) -> tuple[str, list[str]]:
    notes: list[str] = []
    present = {n.lower() for n in names if n.lower() in text.lower()}

    def repl(m: re.Match[str]) -> str:
        pron, tail = m.group(1), m.group(2) or ""
        low, kind = pron.lower(), PRONOUNS[pron.lower()]
        # the most recent name of the pronoun's kind; a thing may be any name, a person may not
        typed = [n for n, k in names.items() if kind in (k, "any")]
        name = next(iter(typed or [n for n in names if kind == "thing"]), None)
        if not name or name.lower() in present:
            return m.group(0)
        nxt = tail.strip().lower()
        possessive = low in {"his", "its", "their"} or (
            low == "her" and bool(nxt) and nxt not in STOPWORDS
        )
        notes.append(f"'{pron}' → {name}")
        return (f"{name}'s" if possessive else name) + tail

    return _PRONOUN_RE.sub(repl, text), notes


def classify(text: str) -> tuple[str, str]:
    """(context type, intent) of a sub-query."""
    if SKILL_RE.search(text):
        return "skill", "tool_usage"
    if RESOURCE_RE.search(text):
        return "resource", "find_resource"
    label = next((label for label, p in _INTENT_RES.items() if p.search(text)), "recall_fact")
    return "memory", label


def intent_analysis(variables: dict[str, Any]) -> dict[str, Any]:
    query = normalize_space(str(variables.get("query") or ""))
    max_q = max(0, min(5, int(variables.get("max_queries") or 5)))
    if not query or is_chitchat(query):
        return {"queries": [], "reasoning": "chit-chat / acknowledgement: nothing to retrieve"}
    names = recent_names(variables.get("recent_messages"))
    queries: list[dict[str, Any]] = []
    notes: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for part in split_compound(query):
        resolved, n = resolve_pronouns(part, names)
        # names asked about earlier in the same query are the most recent antecedents
        names = _add_names({}, part) | {n: k for n, k in names.items() if n not in part}
        resolved = resolved.rstrip("?.! ")
        key = tuple(sorted(set(content_tokens(resolved))))
        if is_chitchat(resolved) or not key or key in seen:
            continue
        seen.add(key)
        notes.extend(n)
        ctype, intent = classify(resolved)
        typed = {"query": resolved, "context_type": ctype, "intent": intent}
        queries.append({**typed, "priority": min(5, len(queries) + 1)})
        if len(queries) >= max_q:
            break
    reasoning = f"{len(queries)} sub-quer{'y' if len(queries) == 1 else 'ies'}"
    if notes:
        reasoning += "; resolved " + ", ".join(notes)
    return {"queries": queries, "reasoning": reasoning}
