"""Agent memories that keep the lesson, not a user's words.

Cases, patterns and skills belong to the agent (`AGENT_CATEGORIES`). Where they are written is
the deployment's policy, `CTXPIPE_AGENT_MEMORY`:

- ``shared`` (the default): under ``agents/{agent}/memories``, read by every user the agent
  serves. Before such a candidate leaves extraction — whichever LLM provider proposed it — each
  of its texts is abstracted against the session it came from (`abstract_candidate`): a word
  the user side of the session wrote (user and system messages, speaker names, tool inputs,
  outputs and errors, the user and session ids) stays only when it is a lower-case dictionary
  word (lemminflect's lexicon); every other such word — a name, a place, a number, an address,
  an unknown term — becomes ``…``, and a quotation made mostly of such words goes whole.
  What is left is the situation and outcome in the agent's and the dictionary's words, with
  the tool and skill names the agent itself uses. Message-id markers are dropped from the
  texts: the memory cites its sources in `source_refs` only, for its history, and a reader who
  may not read those sessions never sees them (the read path filters citations).
- ``per_user``: under ``users/{user}/memories/agents/{agent}``, the user's own space: nothing is
  abstracted and nobody else reads it; erasing the user erases it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from lemminflect import getAllLemmas

from ctxpipe.core.enums import AGENT_CATEGORIES
from ctxpipe.core.models import CandidateMemory, ToolSkillCandidate
from ctxpipe.core.session import Message, RequestContext, ToolUse
from ctxpipe.core.text import STOPWORDS
from ctxpipe.core.uri import slugify

AgentMemoryMode = Literal["shared", "per_user"]
Candidate = ToolSkillCandidate | CandidateMemory

REDACTED = "…"
# a word: letters, digits and the joiners that keep an address, a handle or a version whole
_WORD_RE = re.compile(r"[^\W_](?:[\w.@'’+-]*[^\W_])?")
_QUOTE_RE = re.compile(r"\"[^\"\n]{1,600}\"|“[^”\n]{1,600}”|‘[^’\n]{1,600}’|«[^»\n]{1,600}»")
_MARKER_RE = re.compile(r"\s*\[[^\[\]\n]{1,400}\]")
_RUN_RE = re.compile(r"…(?:[\s,;:/&+-]*…)+")
_CLITIC_RE = re.compile(r"(?:n?['’](?:s|t|ll|re|ve|d|m))$")
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:;\n\"“(]\s*)$")


@dataclass(frozen=True)
class SessionWords:
    """What the user side of one session wrote (casefolded words), and the agent's own names."""

    private: frozenset[str]
    names: frozenset[str]  # written with a capital inside a sentence: a name, a place
    public: frozenset[str]
    message_ids: frozenset[str]


def _words(text: str) -> Iterable[str]:
    for m in _WORD_RE.finditer(text):
        word = m.group(0).casefold()
        yield word
        # "alice.smith@example.org" is also "alice", "smith", "example", "org"
        if any(ch in word for ch in ".@'’+-"):
            yield from (p for p in re.split(r"[.@'’+-]+", word) if p)


def _capitalised(text: str) -> Iterable[str]:
    """Words written with a capital where a sentence does not start: names and places."""
    for m in _WORD_RE.finditer(text):
        word = m.group(0)
        if word[0].isupper() and not _SENTENCE_START_RE.search(text[: m.start()]):
            yield word.casefold()


def session_words(
    messages: Iterable[Message], tools: Iterable[ToolUse], ctx: RequestContext
) -> SessionWords:
    said = [f"{ctx.user_id} {ctx.session_id}"]
    ids: set[str] = set()
    for m in messages:
        ids.add(m.id)
        if m.name:
            said.append(m.name)
        if m.role in ("user", "system", "tool"):
            said.append(m.content)
    said.extend(x for t in tools for x in (t.input, t.output, t.error) if x)
    public = {w for w in _words(" ".join([ctx.agent_id, *(t.name for t in tools)]))}
    private = {w for text in said for w in _words(text)} - public
    names = {w for text in said for w in _capitalised(text)} - public - STOPWORDS
    return SessionWords(frozenset(private), frozenset(names), frozenset(public), frozenset(ids))


@lru_cache(maxsize=65536)
def _dictionary_word(word: str) -> bool:
    if word in STOPWORDS:
        return True
    word = _CLITIC_RE.sub("", word)  # "workshop's", "can't"
    return word.isalpha() and (word in STOPWORDS or bool(getAllLemmas(word)))


def _shareable(token: str, words: SessionWords) -> bool:
    folded = token.casefold()
    if folded not in words.private:
        return True  # the agent's own word, or the extractor's
    # a dictionary word the user side never wrote as a name, in lower case or as a sentence
    # starts ("The", not "UK" or "McDonald")
    return (
        token in (folded, folded.capitalize())
        and folded not in words.names
        and _dictionary_word(folded)
    )


def abstract_text(text: str, words: SessionWords) -> str:
    """`text` without the user side's names, numbers, quotations and message-id markers."""
    if not text:
        return text

    def marker(m: re.Match[str]) -> str:
        inner = [t.strip() for t in m.group(0).strip()[1:-1].split(",")]
        return "" if all(t.split(":")[-1] in words.message_ids for t in inner) else m.group(0)

    def quote(m: re.Match[str]) -> str:
        tokens = _WORD_RE.findall(m.group(0))
        private = sum(1 for t in tokens if t.casefold() in words.private)
        return REDACTED if tokens and private * 2 >= len(tokens) else m.group(0)

    def word(m: re.Match[str]) -> str:
        return m.group(0) if _shareable(m.group(0), words) else REDACTED

    out = _MARKER_RE.sub(marker, text)
    out = _QUOTE_RE.sub(quote, out)
    out = _WORD_RE.sub(word, out)
    out = _RUN_RE.sub(REDACTED, out)
    return re.sub(r"[ \t]{2,}", " ", out).strip()


def abstract_candidate(c: Candidate, words: SessionWords) -> Candidate:
    """An agent-owned candidate with every text abstracted (`abstract_text`); its routing key
    is re-derived from what is left, so no URI segment carries a user's word either."""
    key = abstract_text(c.routing_key.replace("-", " ").replace("_", " "), words)
    slug = slugify(key.replace(REDACTED, " "), max_len=48)
    if not slug:
        slug = c.category.value
    update: dict[str, object] = {
        "routing_key": slug,
        "abstract": abstract_text(c.abstract, words),
        "overview": abstract_text(c.overview, words),
        "content": abstract_text(c.content, words),
    }
    if isinstance(c, ToolSkillCandidate):
        update["best_for"] = abstract_text(c.best_for, words)
        update["common_failures"] = abstract_text(c.common_failures, words)
    return c.model_copy(update=update)


def share_agent_memories(
    candidates: list[Candidate],
    messages: Iterable[Message],
    tools: Iterable[ToolUse],
    ctx: RequestContext,
    mode: AgentMemoryMode,
) -> list[Candidate]:
    """`candidates` as the policy wants them written: agent-owned ones abstracted in
    ``shared`` mode; everything else (and everything in ``per_user`` mode) unchanged."""
    if mode != "shared" or not any(c.category in AGENT_CATEGORIES for c in candidates):
        return candidates
    words = session_words(messages, tools, ctx)
    return [
        abstract_candidate(c, words) if c.category in AGENT_CATEGORIES else c for c in candidates
    ]
