"""DocumentChunker: a ContextNode's L0/L1/L2 as `ChunkRecord`s.

- L0 (abstract) and L1 (overview) are one chunk each; L2 (content) is split at the strongest
  separator that gives pieces that fit (paragraphs, lines, sentences, clauses, words, then
  tokens), the pieces merged back into chunks of up to `chunk_tokens` with an overlap of
  `chunk_overlap_tokens`, measured in the embedding model's own tokens
  (`ctxpipe.index.span_splitter`). No chunk of any level exceeds what the model reads
  (`max_seq_length` minus its special tokens): a level too long for one chunk is split rather
  than silently truncated by the model (an L0/L1 that long is split like L2, its chunk 0 keeps
  the start).
- Measured once: every text of a batch of nodes is tokenized in one call of the model's fast
  tokenizer, and the chunk boundaries are read off its token offsets; each chunk is counted
  again (one batched call) so that a tokenizer whose counts are not additive never gives a
  chunk over the limit. An embedder without a tokenizer is measured by `count_tokens`.
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
from typing import Any, Protocol

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.models import ChunkRecord, ContextNode
from ctxpipe.core.uri import parse_uri
from ctxpipe.index.span_splitter import Measure, offsets_measure, split_spans, strip_span

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
class TokenSource(Protocol):
    """What the chunker needs of a model: its length and its tokenizer's counts (an
    `Embedder`; or `prep_pool.TokenizerFile`, the tokenizer alone). `token_starts`,
    `count_many` and `word_additive`, where offered, let it measure a batch in one call."""

    @property
    def max_seq_length(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...


class DocumentChunker:
    """Splits nodes into chunks that fit the embedding model (token-exact)."""

    def __init__(
        self,
        embedder: TokenSource,
        config: ChunkingConfig | None = None,
        *,
        special_tokens: int | None = None,
    ) -> None:
        self.config = config or ChunkingConfig()
        specials = special_tokens if special_tokens is not None else special_tokens_of(embedder)
        model_limit = int(embedder.max_seq_length) - specials
        if model_limit < 8:
            raise ValueError(f"embedding model reads only {embedder.max_seq_length} tokens")
        self.model_limit = model_limit
        self.chunk_tokens = min(self.config.chunk_tokens, model_limit)
        self.overlap_tokens = min(self.config.chunk_overlap_tokens, self.chunk_tokens // 2)
        self._count: Callable[[str], int] = lru_cache(maxsize=8192)(embedder.count_tokens)
        starts = getattr(embedder, "token_starts", None)
        counts = getattr(embedder, "count_many", None)
        self._starts: Callable[[list[str]], list[list[int]]] | None = starts
        # offsets give exact counts of a span cut between words (see `_split_all`)
        self._exact = starts is not None and bool(getattr(embedder, "word_additive", False))
        self._count_many: Callable[[list[str]], list[int]] = counts or (
            lambda texts: [self._count(t) for t in texts]
        )

    # -------------------------------------------------------------- splitting
    def count_tokens(self, text: str) -> int:
        return self._count(text)

    def split(self, text: str, limit: int | None = None) -> list[str]:
        """`text` in pieces of at most `limit` (default: chunk size) model tokens."""
        return [text[a:b] for a, b, _ in self._split_all([text], limit or self.chunk_tokens)[0]]

    def _split_all(self, texts: list[str], limit: int) -> list[list[tuple[int, int, int]]]:
        """Each text's chunks as (start, end, tokens), spans of it (stripped) of at most
        `limit` tokens each: the boundaries from one batched tokenization, then every chunk
        counted in one more."""
        starts = self._starts(texts) if self._starts is not None else None
        overlap = min(self.overlap_tokens, limit // 2)
        known: list[tuple[int, int, int, int]] = []  # (text, start, end, tokens)
        recount: list[tuple[int, int, int]] = []
        for i, text in enumerate(texts):
            if not text.strip():
                continue
            measure = (
                offsets_measure(starts[i]) if starts is not None else _counting(text, self._count)
            )
            for a, b in split_spans(text, limit, overlap, measure):
                if self._exact and between_words(text, a, b):
                    known.append((i, a, b, measure(a, b)))
                else:
                    recount.append((i, a, b))
        counted = self._count_many([texts[i][a:b] for i, a, b in recount])
        known.extend((i, a, b, n) for (i, a, b), n in zip(recount, counted, strict=True))
        out: list[list[tuple[int, int, int]]] = [[] for _ in texts]
        for i, a, b, n in sorted(known):
            if n <= limit:
                out[i].append((a, b, n))
            else:  # token counts are not always additive (e.g. BPE merges): cut exactly
                out[i].extend(
                    (x, y, self._count(texts[i][x:y]))
                    for x, y in self._hard_split(texts[i], a, b, limit)
                )
        return out

    def _hard_split(self, text: str, a: int, b: int, limit: int) -> list[tuple[int, int]]:
        """Cut ``text[a:b]`` into prefixes of at most `limit` tokens (binary search,
        word-aligned)."""
        out: list[tuple[int, int]] = []
        while a < b:
            a, b = strip_span(text, a, b)
            if a >= b:
                break
            if self._count(text[a:b]) <= limit:
                out.append((a, b))
                break
            lo, hi = a + 1, b
            while lo < hi:  # largest end whose prefix fits
                mid = (lo + hi + 1) // 2
                if self._count(text[a:mid]) <= limit:
                    lo = mid
                else:
                    hi = mid - 1
            cut = lo
            space = text.rfind(" ", a, cut)
            if space > a + (cut - a) // 2:
                cut = space
            piece = strip_span(text, a, cut)
            if piece[0] < piece[1]:
                out.append(piece)
            a = cut
        return out

    # -------------------------------------------------------------- chunks of nodes
    def chunk_for_node(self, node: ContextNode) -> list[ChunkRecord]:
        return self.chunk_nodes([node])[0]

    def chunk_nodes(self, nodes: Sequence[ContextNode]) -> list[list[ChunkRecord]]:
        """The chunks of each node; all the nodes' texts are measured together."""
        heads = self._split_all(  # L0/L1: one chunk unless the model could not read it whole
            [t for n in nodes for t in (n.abstract, n.overview)], self.model_limit
        )
        bodies = self._split_all([n.content for n in nodes], self.chunk_tokens)
        out = []
        for k, node in enumerate(nodes):
            chunks: list[ChunkRecord] = []
            for level, text in ((0, node.abstract), (1, node.overview)):
                for i, (a, b, n) in enumerate(heads[2 * k + level]):
                    piece = text[a:b]
                    refs = narrow_refs(node.source_refs, piece)
                    chunks.append(self._record(node, level, i, piece, refs, n))
            spans = message_spans(node)
            for i, (a, b, n) in enumerate(bodies[k]):
                piece = node.content[a:b]
                refs = (
                    refs_in_span(spans, a, b)
                    if spans is not None
                    else narrow_refs(node.source_refs, piece)
                )
                chunks.append(self._record(node, 2, i, piece, refs, n))
            out.append(chunks)
        return out

    def _record(
        self, node: ContextNode, level: int, index: int, text: str, refs: list[str], tokens: int
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
            metadata={"tokens": tokens},
        )


def between_words(text: str, a: int, b: int) -> bool:
    """Whether ``text[a:b]`` neither starts nor ends inside a word."""
    head = a == 0 or not (text[a - 1].isalnum() and text[a].isalnum())
    tail = b == len(text) or not (text[b - 1].isalnum() and text[b].isalnum())
    return head and tail


def _counting(text: str, count: Callable[[str], int]) -> Measure:
    """A span's tokens counted on its substring (an embedder without token offsets)."""
    return lambda a, b: count(text[a:b])


__all__ = [
    "DocumentChunker",
    "MessageSpan",
    "cited_ids",
    "message_spans",
    "narrow_refs",
    "special_tokens_of",
    "split_ref",
]
