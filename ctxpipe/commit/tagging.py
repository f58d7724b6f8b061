"""Tags of a memory: 3–8 atomic lowercase tags per node, reused before created.

Tags are derived from the node's own text when it is written: proper names first, then the
content words it repeats, then the rest in order of appearance. Before a tag is created the
owner's existing tags are looked up by prefix (`find_tags`): an existing tag with the same stem
("hiking" for a new "hikes") is reused, so one owner does not collect near-duplicate tags. A new
tag is an inflected word's dictionary form when that has the same stem ("lives" → "live"), so
the nodes one commit writes side by side spell a stem alike. A
merged node keeps its earlier tags first. Tags live in the node's `.meta.json` (`metadata.tags`)
and so in the replica's `context_nodes.metadata`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Protocol

from lemminflect import getAllLemmas

from ctxpipe.commit.policies.base import APPLIED_COMMITS_KEY
from ctxpipe.core.uri import CtxURI
from ctxpipe.core.validity import strip_dates
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.units.lexical import STOPWORDS, stem

MIN_TAGS, MAX_TAGS = 3, 8
TAGS_KEY = "tags"
_TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
_MARKER_RE = re.compile(r"\[[^\]]*\]")  # message-id citations are not words of the memory
_SENTENCE_START_RE = re.compile(r"(?:^|[.!?:;\n]\s*|\(\s*)$")
# words that say how a memory is phrased, not what it is about
_GENERIC = frozenset(
    """user assistant prefers prefer preferred likes like liked loves love loved wants want
    wanted says said mentioned mention told tell uses use used using thing things something
    someone people person time times day days week weeks year years really very much many
    lot lots good great nice new old now currently recently usually always often never""".split()
)


class TagVocabulary(Protocol):
    def find_tags(self, prefix: str, limit: int = 50) -> list[str]: ...

    def add(self, tags: Iterable[str]) -> None: ...


def prefix_of(tag: str) -> str:
    """The lookup prefix of a tag: its stem less one letter, at least 3 letters (so that
    "hike", "hikes" and "hiking" share one)."""
    s = stem(tag)
    return s[: max(3, len(s) - 1)]


@lru_cache(maxsize=65536)
def _base(word: str) -> str:
    """`word`'s dictionary form when it shares its stem ("lives" → "live"), else `word`."""
    for forms in getAllLemmas(word).values():
        if forms and forms[0] != word and stem(forms[0]) == stem(word):
            return str(forms[0])
    return word


def candidate_tags(text: str) -> list[str]:
    """Atomic lowercase tags for `text`, most salient first (no vocabulary applied)."""
    clean = _MARKER_RE.sub(" ", strip_dates(text))
    counts: Counter[str] = Counter()
    proper: set[str] = set()
    first: dict[str, int] = {}
    for m in _TOKEN_RE.finditer(clean):
        raw = m.group(0).strip("'-")
        word = _base(raw.lower())
        if len(word) < 3 or word in STOPWORDS or word in _GENERIC or "'" in word:
            continue
        counts[word] += 1
        first.setdefault(word, m.start())
        if raw[0].isupper() and not _SENTENCE_START_RE.search(clean[: m.start()]):
            proper.add(word)
    by_stem: dict[str, str] = {}
    for word in sorted(counts, key=lambda w: first[w]):  # one tag per stem
        by_stem.setdefault(stem(word), word)
    words = list(by_stem.values())
    return sorted(words, key=lambda w: (w not in proper, -counts[w], first[w]))


def choose_tags(text: str, vocabulary: TagVocabulary, existing: Iterable[str] = ()) -> list[str]:
    """The node's tags: its existing ones first, then new ones, each reused from the
    vocabulary when a tag of the same stem exists; at most `MAX_TAGS`."""
    tags: list[str] = []
    stems: set[str] = set()
    for tag in list(existing) + candidate_tags(text):
        if len(tags) >= MAX_TAGS:
            break
        s = stem(tag)
        if s in stems:
            continue
        known = [t for t in vocabulary.find_tags(prefix_of(tag)) if stem(t) == s]
        chosen = known[0] if known and tag not in known else tag
        tags.append(chosen)
        stems.add(s)
    vocabulary.add(tags)
    return tags


class OwnerTagVocabulary:
    """The tags already used in one owner space, read from the FS (`.meta.json` of every node
    under ``ctx://{account}/{scope}/{owner}/``) once, then kept up to date by `add`."""

    def __init__(
        self, fs: ContextFS, owner_uri: CtxURI, *, exclude_commit: str | None = None
    ) -> None:
        self._fs = fs
        self._owner = owner_uri
        self._exclude = exclude_commit
        self._tags: list[str] | None = None

    def _load(self) -> list[str]:
        """With `exclude_commit` this is the vocabulary as it was before that commit: nodes the
        commit already wrote are left out (a commit run again after a failed write phase
        chooses the tags its first attempt chose) and the tags it chooses are not added (its
        nodes, written concurrently, choose alike whatever order they finish in)."""
        if self._tags is None:
            found: dict[str, None] = {}
            if self._fs.exists(self._owner):
                for uri, _ in self._fs.walk_nodes(self._owner):
                    meta = self._fs.read_node(uri, include_content=False).metadata
                    if self._exclude and self._exclude in meta.get(APPLIED_COMMITS_KEY, []):
                        continue
                    for t in meta.get(TAGS_KEY) or []:
                        if isinstance(t, str):
                            found.setdefault(t, None)
            self._tags = sorted(found)
        return self._tags

    def find_tags(self, prefix: str, limit: int = 50) -> list[str]:
        return [t for t in self._load() if t.startswith(prefix)][:limit]

    def add(self, tags: Iterable[str]) -> None:
        if self._exclude:
            return
        known = self._load()
        for t in tags:
            if t not in known:
                known.append(t)
        known.sort()


__all__ = [
    "MAX_TAGS",
    "MIN_TAGS",
    "TAGS_KEY",
    "OwnerTagVocabulary",
    "TagVocabulary",
    "candidate_tags",
    "choose_tags",
    "prefix_of",
]
