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
    rf";\s*|,?\s+and also\s+|,\s*also,?\s+|\s+also,\s+|,?\s+(?:and|or|plus)\s+(?=(?:{STARTERS})\b)",
    re.I,
)
SKILL_RE = re.compile(
    r"\bhow (?:do|can|should|would) (?:i|we|you) (?:use|run|call|invoke|configure)\b|"
    r"\bhow to (?:use|run|call|invoke|configure)\b|\busage of\b|\b(?:tool|tools|skill|skills|"
    r"command|commands|cli|api|plugin|script)\b|\b[a-z]+_[a-z_]+\b",
    re.I,
)
RESOURCE_RE = re.compile(
    r"\b(?:docs?|documentation|files?|spec|specs|specification|readme|manual|guide|pdf|wiki|"
    r"page|paper|papers|reference|handbook|runbook|design doc|notes|slides)\b",
    re.I,
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
_PRONOUN_RE = re.compile(r"\b(he|him|his|she|her|it|its|they|them|their)\b(\s+\w+)?", re.I)
_KIN_BEFORE = re.compile(r"\b(?:my|our)\s+[a-z-]+(?:\s+[a-z-]+)?,?\s*$", re.I)
_NEXT_WORD = re.compile(r"^\s*('s\b|[a-z]+)")


def split_compound(query: str) -> list[str]:
    parts: list[str] = []
    for sentence in split_sentences(query) or [query]:
        for piece in SPLIT_RE.split(sentence):
            piece = re.sub(r"^(?:and|also|plus|or)\b[\s,]*", "", piece.strip(" ,"), flags=re.I)
            piece = piece.strip(" ,;")
            if piece:
                parts.append(piece)
    return parts


def recent_names(recent: Any) -> list[tuple[str, str]]:
    """(name, 'person'|'thing') from the recent messages, most recent first."""
    found: list[tuple[str, str]] = []
    for msg in reversed(load_messages(recent)):
        for s in reversed(msg.sentences):
            found = _add_names(found, s)
    return found


def _is_person(before: str, after: str) -> bool:
    """A name is a person when a kin word of the speaker stands before it ("my sister
    Hannah") or it is the subject of a past-tense verb ("Hannah said …")."""
    if _KIN_BEFORE.search(before):
        return True
    m = _NEXT_WORD.match(after)
    if not m or m.group(1) == "'s":
        return bool(m)
    word = m.group(1)
    lemma = verb_lemma(word)
    return lemma is not None and lemma not in ("be", "have", "do") and lemma != word


def _add_names(found: list[tuple[str, str]], sentence: str) -> list[tuple[str, str]]:
    """Append the sentence's names (a 'person' cue anywhere upgrades an earlier entry)."""
    for name in reversed(names_in(sentence)):
        st = sentence.find(name)
        person = _is_person(sentence[:st], sentence[st + len(name) :])
        idx = next((i for i, (n, _) in enumerate(found) if n == name), None)
        if idx is None:
            found.append((name, "person" if person else "thing"))
        elif person:
            found[idx] = (name, "person")
    return found


def resolve_pronouns(text: str, names: list[tuple[str, str]]) -> tuple[str, list[str]]:
    notes: list[str] = []
    present = {n.lower() for n, _ in names if n.lower() in text.lower()}

    def pick(kind: str) -> str | None:
        """The most recent name of that kind; a thing may be any name, a person may not."""
        latest = names[0][0] if names else None
        typed = next((n for n, k in names if k == kind), None)
        return latest if kind == "any" else typed or (latest if kind == "thing" else None)

    def repl(m: re.Match[str]) -> str:
        pron, tail = m.group(1), m.group(2) or ""
        low = pron.lower()
        name = pick(PRONOUNS[low])
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
        names = _add_names([], part) + [x for x in names if x[0] not in part]
        resolved = resolved.rstrip("?.! ")
        key = tuple(sorted(set(content_tokens(resolved))))
        if is_chitchat(resolved) or not key or key in seen:
            continue
        seen.add(key)
        notes.extend(n)
        ctype, intent = classify(resolved)
        priority = min(5, len(queries) + 1)
        queries.append(
            {"query": resolved, "context_type": ctype, "intent": intent, "priority": priority}
        )
        if len(queries) >= max_q:
            break
    reasoning = f"{len(queries)} sub-quer{'y' if len(queries) == 1 else 'ies'}"
    if notes:
        reasoning += "; resolved " + ", ".join(notes)
    return {"queries": queries, "reasoning": reasoning}
