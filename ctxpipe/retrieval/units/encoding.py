"""The units the index embeds next to a chunk, and how the model reads them (the same code
gives find its vectors when a replica has none stored).

A chunk's units (`retrieval.units.lexical.unit_texts`) are its lines and, for a line of several
sentences, each sentence with the line's speaker prefix. `ChunkingConfig.unit_context` says what
the model reads to give a unit its vector:

- ``chunk`` (the default): the chunk's lines together, as one text (in windows of the model's
  length), and each unit's vector is the mean of that pass's token embeddings over the unit
  (`SpanEmbedder.encode_spans`, "late chunking"): every token of the chunk goes through the model
  once, and a line is read in the context of the lines around it;
- ``line``: each line on its own, its sentences pooled from the line's pass;
- ``none``: every unit text on its own (each sentence encoded again after its line).

The model reads a line as find returns it: the speaker, the date and the words of an archive
turn, a fact with its validity dates (a reading without the dates lost 5-8 points of temporal
recall on LoCoMo: "when" questions match texts that carry a date). An embedder that does not
mean-pool its tokens reads every unit on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxpipe.core.config import UnitContext
from ctxpipe.providers.base import Embedder, SpanEmbedder
from ctxpipe.retrieval.units.lexical import Unit, chunk_lines

Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LineUnits:
    """One line of a chunk and its sentences (none when it is one sentence), with each
    sentence's place in the line (None: a sentence could not be placed: it is read alone)."""

    text: str
    sentences: tuple[str, ...] = ()
    ranges: tuple[Ranges, ...] | None = ()

    @property
    def texts(self) -> list[str]:
        return list(dict.fromkeys([self.text, *self.sentences]))


@dataclass
class Window:
    """One text the model reads, and the units pooled from it (text → its ranges)."""

    read: str = ""
    units: dict[str, Ranges] = field(default_factory=dict)


def line_units(text: str, chunk_refs: Sequence[str], context_type: str | None) -> list[LineUnits]:
    """The lines of a chunk that find ranks, each with its sentences and where they lie."""
    return [_line(line) for line in chunk_lines(text, chunk_refs, context_type)]


def _line(line: Unit) -> LineUnits:
    placed = line.sentence_ranges()
    if placed is None:  # a sentence not found in the line: the sentences are read alone
        return LineUnits(line.text, tuple(s.text for s in line.sentences()), None)
    return LineUnits(line.text, tuple(t for t, _ in placed), tuple(tuple(r) for _, r in placed))


def unit_texts_of(lines: Iterable[LineUnits]) -> list[str]:
    """The distinct unit texts of a chunk's lines, in order (= `units.lexical.unit_texts`)."""
    return list(dict.fromkeys(t for line in lines for t in line.texts))


def windows(
    lines: Sequence[LineUnits],
    max_tokens: int | None,
    count: Callable[[str], int] = len,
) -> list[Window]:
    """The lines of one chunk packed, in order, into texts of at most `max_tokens` tokens
    (a longer line is a window of its own; None: one text of all of them), with each unit's
    ranges in its window."""
    out: list[Window] = []
    used = 0
    for line in lines:
        tokens = count(line.text) + 1 if max_tokens is not None else 0
        if not out or (max_tokens is not None and out[-1].read and used + tokens > max_tokens):
            out.append(Window())
            used = 0
        win = out[-1]
        start = len(win.read) + 1 if win.read else 0
        win.read = f"{win.read}\n{line.text}" if win.read else line.text
        used += tokens
        win.units.setdefault(line.text, ((start, start + len(line.text)),))
        for sentence, ranges in zip(line.sentences, line.ranges or (), strict=False):
            win.units.setdefault(sentence, tuple((start + a, start + b) for a, b in ranges))
    return out


def encode_units(
    embedder: Embedder,
    chunks: Sequence[Sequence[LineUnits]],
    *,
    context: UnitContext,
    texts: Sequence[str] = (),
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The vectors of the units of each of `chunks` (the lines of one chunk each), by text,
    in the same order — a unit read in a chunk's context has that chunk's vector — and the
    vectors of `texts` (chunk texts, encoded with the units that are not pooled)."""
    pooled = context != "none" and isinstance(embedder, SpanEmbedder) and embedder.pools_spans
    wins: list[tuple[int, Window]] = []
    rows: list[Any] = []
    if pooled and context == "chunk":
        assert isinstance(embedder, SpanEmbedder)
        # each chunk's lines as one text; one that the model cannot read whole is packed into
        # several by its lines' token counts
        whole = [(i, w) for i, lines in enumerate(chunks) for w in windows(lines, None)]
        got = (
            embedder.encode_spans(
                [w.read for _, w in whole], [list(w.units.values()) for _, w in whole], fit=True
            )
            if whole
            else []
        )
        long = sorted({i for (i, _), row in zip(whole, got, strict=True) if row is None})
        wins = [(i, w) for (i, w), row in zip(whole, got, strict=True) if row is not None]
        rows = [row for row in got if row is not None]
        if long:
            limit = int(embedder.max_seq_length) - 2  # [CLS] and [SEP]
            tokens = _line_tokens(embedder, [line for i in long for line in chunks[i]])
            packed = [(i, w) for i in long for w in windows(chunks[i], limit, tokens)]
            wins.extend(packed)
            rows.extend(_read(embedder, packed))
    elif pooled:
        wins = [(i, w) for i, lines in enumerate(chunks) for w in windows(lines, 0, len)]
        rows = _read(embedder, wins)  # max 0: a window a line
    out: list[dict[str, Any]] = [{} for _ in chunks]
    for (i, win), row in zip(wins, rows, strict=True):
        whole_text = ((0, len(win.read)),)
        for (unit, ranges), vector in zip(win.units.items(), row[1:], strict=True):
            out[i].setdefault(unit, row[0] if ranges == whole_text else vector)
    own = dict.fromkeys(texts)
    alone = {  # units no window gave a vector (not pooled, or not placed): each read alone
        t: None
        for i, lines in enumerate(chunks)
        for t in unit_texts_of(lines)
        if t not in out[i] and t not in own
    }
    todo = [*own, *alone]
    encoded = dict(zip(todo, embedder.encode(todo), strict=True)) if todo else {}
    for i, lines in enumerate(chunks):
        for t in unit_texts_of(lines):
            if t not in out[i]:
                out[i][t] = encoded[t]
    return out, {t: encoded[t] for t in own}


def _read(embedder: Embedder, wins: Sequence[tuple[int, Window]]) -> list[Any]:
    assert isinstance(embedder, SpanEmbedder)
    if not wins:
        return []
    return list(
        embedder.encode_spans([w.read for _, w in wins], [list(w.units.values()) for _, w in wins])
    )


def _line_tokens(embedder: Embedder, lines: Sequence[LineUnits]) -> Callable[[str], int]:
    """Token counts of the lines' texts, counted in one batched call when the embedder can."""
    texts = list(dict.fromkeys(line.text for line in lines))
    count_many = getattr(embedder, "count_many", None)
    counted = count_many(texts) if count_many else [embedder.count_tokens(t) for t in texts]
    return dict(zip(texts, counted, strict=True)).__getitem__


__all__ = ["LineUnits", "UnitContext", "Window", "encode_units", "line_units", "unit_texts_of"]
