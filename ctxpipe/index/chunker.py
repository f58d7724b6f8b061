"""DocumentChunker: a ContextNode's L0/L1/L2 as `ChunkRecord`s.

- L0 (abstract) and L1 (overview) are one chunk each; L2 (content) is split with
  langchain-text-splitters' `RecursiveCharacterTextSplitter`, measured in the embedding model's
  own tokens. No chunk of any level exceeds what the model reads (`max_seq_length` minus its
  special tokens): a level too long for one chunk is split rather than silently truncated by
  the model (an L0/L1 that long is split like L2, its chunk 0 keeps the start).
- Chunk ids are the stable hash of (uri, level, index) (`ChunkRecord.make_id`).
- Every chunk keeps the source message ids it covers, qualified ``{session_id}:{message_id}``:
  for a session archive's L2 (lines ``[m7] user: …``, one message per line), the ids of the
  message lines the chunk overlaps; for any other text, the node's `source_refs`, narrowed to
  the refs the chunk cites (``[m3]``, ``[m1, m2]``) when it cites any.

Deterministic: the same node always gives the same chunks (reindex equals incremental).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langchain_text_splitters import RecursiveCharacterTextSplitter

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.models import ChunkRecord, ContextNode
from ctxpipe.core.uri import parse_uri
from ctxpipe.providers.base import Embedder

# Paragraphs, lines, sentences, clauses, words, characters.
SEPARATORS = ["\n\n", "\n", ". ", "。", "; ", ", ", " ", ""]
_CITE_RE = re.compile(r"\[([^\[\]\n]{1,400})\]")
DEFAULT_SPECIAL_TOKENS = 2  # [CLS] … [SEP] for BERT-style encoders


def special_tokens_of(embedder: Any) -> int:
    """Special tokens the model adds to every text (e.g. 2 for [CLS]/[SEP])."""
    try:
        tokenizer = embedder.model.tokenizer
        return int(tokenizer.num_special_tokens_to_add(pair=False))
    except Exception:  # noqa: BLE001 - any embedder without an HF tokenizer
        return DEFAULT_SPECIAL_TOKENS


# ------------------------------------------------------------------ source refs
def split_ref(ref: str) -> tuple[str, str]:
    """``"s1:m3"`` → ``("s1", "m3")``; an unqualified ``"m3"`` → ``("", "m3")``."""
    sid, sep, mid = ref.partition(":")
    return (sid, mid) if sep else ("", ref)


def cited_ids(text: str) -> set[str]:
    """Message ids cited in brackets: ``[m3]``, ``[m1, m2]``, ``[s1:m4]``."""
    found: set[str] = set()
    for m in _CITE_RE.finditer(text):
        for part in m.group(1).split(","):
            part = part.strip()
            if part:
                found.add(part)
    return found


def narrow_refs(refs: Sequence[str], text: str) -> list[str]:
    """`refs` cited in `text` (by message id or qualified ref); all of them if none is cited."""
    if not refs:
        return []
    cited = cited_ids(text)
    if not cited:
        return list(refs)
    kept = [r for r in refs if r in cited or split_ref(r)[1] in cited]
    return kept or list(refs)


@dataclass(frozen=True)
class MessageSpan:
    start: int
    end: int
    ref: str


def message_spans(node: ContextNode) -> list[MessageSpan] | None:
    """Character spans of the messages of an archive's L2, or None for other nodes.

    An archive lists its messages in ``metadata.message_ids``; each message starts a line
    ``[{id}] {role}…`` and runs until the next message's line (content may span lines)."""
    ids = node.metadata.get("message_ids") if isinstance(node.metadata, dict) else None
    if not isinstance(ids, list) or not ids or not node.content:
        return None
    wanted = {str(i) for i in ids}
    qualified = {split_ref(r)[1]: r for r in node.source_refs if split_ref(r)[0]}
    session = _session_of(node.uri)
    starts: list[tuple[int, str]] = []
    pos = 0
    for line in node.content.splitlines(keepends=True):
        if line.startswith("["):
            close = line.find("] ")
            if close > 1 and line[1:close] in wanted:
                mid = line[1:close]
                starts.append((pos, qualified.get(mid) or (f"{session}:{mid}" if session else mid)))
        pos += len(line)
    spans = []
    for i, (start, ref) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(node.content)
        spans.append(MessageSpan(start, end, ref))
    return spans


def _session_of(uri: str) -> str:
    try:
        u = parse_uri(uri)
    except ValueError:
        return ""
    return u.segments[0] if u.scope == "sessions" and u.segments else ""


def refs_in_span(spans: Sequence[MessageSpan], start: int, end: int) -> list[str]:
    out = [s.ref for s in spans if s.start < end and s.end > start]
    return list(dict.fromkeys(out))


# ------------------------------------------------------------------ the chunker
class DocumentChunker:
    """Splits nodes into chunks that fit the embedding model (token-exact)."""

    def __init__(
        self,
        embedder: Embedder,
        config: ChunkingConfig | None = None,
        *,
        special_tokens: int | None = None,
    ) -> None:
        self.config = config or ChunkingConfig()
        self._counter = embedder
        specials = special_tokens if special_tokens is not None else special_tokens_of(embedder)
        model_limit = int(embedder.max_seq_length) - specials
        if model_limit < 8:
            raise ValueError(f"embedding model reads only {embedder.max_seq_length} tokens")
        self.model_limit = model_limit
        self.chunk_tokens = min(self.config.chunk_tokens, model_limit)
        self.overlap_tokens = min(self.config.chunk_overlap_tokens, self.chunk_tokens // 2)
        self._count: Callable[[str], int] = lru_cache(maxsize=8192)(embedder.count_tokens)
        self._splitters: dict[int, RecursiveCharacterTextSplitter] = {}

    def _splitter(self, limit: int) -> RecursiveCharacterTextSplitter:
        splitter = self._splitters.get(limit)
        if splitter is None:
            splitter = RecursiveCharacterTextSplitter(
                separators=SEPARATORS,
                chunk_size=limit,
                chunk_overlap=min(self.overlap_tokens, limit // 2),
                length_function=self._count,
                keep_separator=True,
                strip_whitespace=True,
            )
            self._splitters[limit] = splitter
        return splitter

    # -------------------------------------------------------------- splitting
    def count_tokens(self, text: str) -> int:
        return self._count(text)

    def split(self, text: str, limit: int | None = None) -> list[str]:
        """`text` in pieces of at most `limit` (default: chunk size) model tokens."""
        limit = limit or self.chunk_tokens
        text = text.strip()
        if not text:
            return []
        if self._count(text) <= limit:
            return [text]
        pieces = self._splitter(limit).split_text(text)
        out: list[str] = []
        for piece in pieces:
            if self._count(piece) <= limit:
                out.append(piece)
            else:  # token counts are not always additive (e.g. BPE merges): cut exactly
                out.extend(self._hard_split(piece, limit))
        return [p for p in out if p.strip()]

    def _hard_split(self, text: str, limit: int) -> list[str]:
        """Cut `text` into prefixes of at most `limit` tokens (binary search, word-aligned)."""
        out: list[str] = []
        rest = text.strip()
        while rest:
            if self._count(rest) <= limit:
                out.append(rest)
                break
            lo, hi = 1, len(rest)
            while lo < hi:  # largest prefix length whose token count fits
                mid = (lo + hi + 1) // 2
                if self._count(rest[:mid]) <= limit:
                    lo = mid
                else:
                    hi = mid - 1
            cut = lo
            space = rest.rfind(" ", 0, cut)
            if space > cut // 2:
                cut = space
            out.append(rest[:cut].strip())
            rest = rest[cut:].strip()
        return [p for p in out if p]

    # -------------------------------------------------------------- chunks of a node
    def chunk_for_node(self, node: ContextNode) -> list[ChunkRecord]:
        chunks: list[ChunkRecord] = []
        for level, text in ((0, node.abstract), (1, node.overview)):
            # one chunk; split only when the model could not read it whole
            for i, piece in enumerate(self.split(text, self.model_limit)):
                chunks.append(
                    self._record(node, level, i, piece, narrow_refs(node.source_refs, piece))
                )
        spans = message_spans(node)
        search_from = 0
        for i, piece in enumerate(self.split(node.content)):
            if spans is not None:
                start = node.content.find(piece, search_from)
                if start < 0:
                    start = node.content.find(piece)
                search_from = max(start, 0) + 1
                refs = refs_in_span(spans, max(start, 0), max(start, 0) + len(piece))
            else:
                refs = narrow_refs(node.source_refs, piece)
            chunks.append(self._record(node, 2, i, piece, refs))
        return chunks

    def _record(
        self, node: ContextNode, level: int, index: int, text: str, refs: list[str]
    ) -> ChunkRecord:
        return ChunkRecord(
            chunk_id=ChunkRecord.make_id(node.uri, level, index),
            uri=node.uri,
            parent_uri=node.parent_uri,
            level=level,
            chunk_index=index,
            text_content=text,
            context_type=node.context_type.value,
            category=node.category,
            owner_space=node.owner_space,
            source_refs=refs,
            metadata={"tokens": self._count(text)},
        )


__all__ = [
    "DocumentChunker",
    "MessageSpan",
    "cited_ids",
    "message_spans",
    "narrow_refs",
    "special_tokens_of",
    "split_ref",
]
