"""Recursive splitting of a text into chunks of at most N tokens, as (start, end) spans.

The text is cut at the strongest separator it holds (paragraphs, then lines, sentences,
clauses, words), each separator kept at the end of the piece before it; a piece still too
long is cut again at the next separator, down to single tokens. The pieces are then merged back
in order into chunks of up to N tokens, consecutive chunks sharing up to `overlap` tokens of
whole pieces. A chunk is the stripped span of the text it covers, so where each chunk lies in
the text is known without searching for it.

What a span measures is a function of (start, end): from one tokenization's token offsets
(`offsets_measure`, a bisection) or by counting the substring.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import pairwise

# Paragraphs, lines, sentences, clauses, words; "" = single tokens (characters when measured
# by counting).
SEPARATORS = ("\n\n", "\n", ". ", "。", "; ", ", ", " ", "")

Measure = Callable[[int, int], int]  # tokens of text[start:end]


def offsets_measure(starts: Sequence[int]) -> Measure:
    """Tokens of a span = the tokens (by their start offsets, sorted) that start inside it."""

    def measure(a: int, b: int) -> int:
        return bisect_left(starts, b) - bisect_left(starts, a)

    measure.starts = starts  # type: ignore[attr-defined]  # token boundaries for ""
    return measure


def strip_span(text: str, a: int, b: int) -> tuple[int, int]:
    """(a, b) narrowed past leading and trailing whitespace of ``text[a:b]``."""
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def split_spans(
    text: str,
    limit: int,
    overlap: int,
    measure: Measure,
    separators: Sequence[str] = SEPARATORS,
) -> list[tuple[int, int]]:
    """The chunks of `text` as stripped spans of at most `limit` tokens (by `measure`; a
    single token or character longer than that is a chunk alone)."""
    a, b = strip_span(text, 0, len(text))
    if a >= b:
        return []
    if measure(a, b) <= limit:
        return [(a, b)]
    out: list[tuple[int, int]] = []
    for span in _split(text, a, b, limit, overlap, measure, tuple(separators)):
        span = strip_span(text, *span)
        if span[0] < span[1]:
            out.append(span)
    return out


def _pieces(text: str, a: int, b: int, sep: str, measure: Measure) -> list[tuple[int, int]]:
    """``text[a:b]`` cut after each `sep` (or at each token / character for "")."""
    if sep == "":
        starts = getattr(measure, "starts", None)
        if starts is None:
            cuts = list(range(a + 1, b))
        else:
            cuts = [s for s in starts[bisect_left(starts, a + 1) : bisect_left(starts, b)]]
    else:
        cuts = []
        at = text.find(sep, a, b)
        while at >= 0:
            end = at + len(sep)
            if end < b:
                cuts.append(end)
            at = text.find(sep, end, b)
    edges = [a, *cuts, b]
    return [(x, y) for x, y in pairwise(edges) if y > x]


def _split(
    text: str,
    a: int,
    b: int,
    limit: int,
    overlap: int,
    measure: Measure,
    separators: tuple[str, ...],
) -> list[tuple[int, int]]:
    k = next((k for k, sep in enumerate(separators) if sep == "" or text.find(sep, a, b) >= 0), -1)
    if k < 0:  # no separator left (a list without ""): the piece as it is
        return [(a, b)]
    sep, rest = separators[k], separators[k + 1 :]
    out: list[tuple[int, int]] = []
    current: list[tuple[int, int, int]] = []  # (start, end, tokens) of the pieces being merged
    total = 0
    for x, y in _pieces(text, a, b, sep, measure):
        n = measure(x, y)
        if n > limit and rest:  # a piece too long on its own: cut it at the next separator
            if current:
                out.append((current[0][0], current[-1][1]))
                current, total = [], 0
            out.extend(_split(text, x, y, limit, overlap, measure, rest))
            continue
        if current and total + n > limit:
            out.append((current[0][0], current[-1][1]))
            while current and (total > overlap or total + n > limit):
                total -= current.pop(0)[2]  # keep at most `overlap` tokens of the last chunk
        current.append((x, y, n))
        total += n
    if current:
        out.append((current[0][0], current[-1][1]))
    return out


__all__ = ["SEPARATORS", "Measure", "offsets_measure", "split_spans", "strip_span"]
