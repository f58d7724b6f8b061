"""What the model reads to embed the units find ranks (`retrieval.units.encoding`), and the
length batching of `encode_spans`. Fake embedders; no servers, no model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ctxpipe.providers.token_reader import span_mask, span_ranges, token_batches
from ctxpipe.retrieval.units.encoding import encode_units, line_units, unit_texts_of, windows
from ctxpipe.retrieval.units.lexical import unit_texts

ARCHIVE = (
    "[m1] user (Ann) on 8 May 2023: I adopted a puppy named Biscuit. He chews my shoes.\n"
    "[m2] assistant (Bo) on 8 May 2023: Congratulations! Try a bitter apple spray.\n"
    "[m3] user (Ann) on 8 May 2023: I run on Sundays."
)
REFS = ["s1:m1", "s1:m2", "s1:m3"]
FACT = "- Ann lives in Lisbon (valid from 2023-07-01) [m3]\n- Ann likes tea. And cake. [m1]"


class Recorder:
    """Records what it is asked to read; vectors are (length of the text, span index)."""

    def __init__(self, *, pools: bool = True) -> None:
        self.read: list[str] = []
        self.spans: list[Any] = []
        self.pools_spans = pools
        self.max_seq_length = 256

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.read.extend(texts)
        return [[float(len(t)), -1.0] for t in texts]

    def encode_spans(
        self, texts: Sequence[str], spans: Any, *, fit: bool = False
    ) -> list[list[list[float]] | None]:
        out: list[list[list[float]] | None] = []
        for t, s in zip(texts, spans, strict=True):
            if fit and self.count_tokens(t) > self.max_seq_length - 2:
                out.append(None)  # longer than the model reads: not read
                continue
            self.read.append(t)
            self.spans.append(s)
            out.append(
                [[float(len(t)), 0.0], *([float(len(t)), float(i + 1)] for i in range(len(s)))]
            )
        return out


def places(read: str, ranges: Sequence[tuple[int, int]]) -> str:
    return "".join(read[a:b] for a, b in ranges)


def test_lines_are_read_as_find_returns_them_and_sentences_are_placed() -> None:
    lines = line_units(ARCHIVE, REFS, "session")
    assert unit_texts_of(lines) == unit_texts(ARCHIVE, REFS, "session")  # the same units
    first = lines[0]
    assert first.text == "Ann (8 May 2023): I adopted a puppy named Biscuit. He chews my shoes."
    assert first.sentences == (
        "Ann (8 May 2023): I adopted a puppy named Biscuit.",
        "Ann (8 May 2023): He chews my shoes.",
    )
    assert first.ranges is not None
    assert [places(first.text, r) for r in first.ranges] == list(first.sentences)
    assert lines[2].sentences == () and lines[2].text == "Ann (8 May 2023): I run on Sundays."


def test_a_fact_is_read_with_its_dates_and_its_sentences_placed() -> None:
    lines = line_units(FACT, ["s1:m1", "s1:m3"], "memory")
    assert lines[0].text == "Ann lives in Lisbon (valid from 2023-07-01)"
    assert lines[1].ranges is not None
    assert [places(lines[1].text, r) for r in lines[1].ranges] == ["Ann likes tea.", "And cake."]


def test_windows_pack_lines_in_order_within_the_limit() -> None:
    lines = line_units(ARCHIVE, REFS, "session")
    [one] = windows(lines, 100, lambda t: len(t.split()))
    assert one.read == "\n".join(line.text for line in lines)
    for line in lines:  # every unit's ranges point at its words inside the window
        assert places(one.read, one.units[line.text]) == line.text
    second = lines[0].sentences[1]
    assert places(one.read, one.units[second]) == "Ann (8 May 2023): He chews my shoes."
    small = windows(lines, 20, lambda t: len(t.split()))
    assert [w.read for w in small] == [lines[0].text, f"{lines[1].text}\n{lines[2].text}"]
    assert [w.read for w in windows(lines, 0, len)] == [line.text for line in lines]


@pytest.mark.parametrize("context", ["chunk", "line", "none"])
def test_every_unit_gets_a_vector_and_each_text_is_read_once(context: Any) -> None:
    emb = Recorder()
    chunks = [line_units(ARCHIVE, REFS, "session"), line_units(FACT, ["s1:m1"], "memory")]
    per_chunk, own = encode_units(emb, chunks, context=context, texts=["a summary"])
    assert [set(v) for v in per_chunk] == [set(unit_texts_of(lines)) for lines in chunks]
    assert set(own) == {"a summary"}
    assert len(emb.read) == len(set(emb.read))
    if context == "chunk":
        assert len(emb.spans) == 2  # one window per chunk
        assert "Ann (8 May 2023): He chews my shoes." not in emb.read
    elif context == "line":
        assert len(emb.spans) == 5  # a window per line
    else:
        assert emb.spans == [] and "Ann (8 May 2023): He chews my shoes." in emb.read


def test_an_embedder_that_does_not_mean_pool_reads_every_unit() -> None:
    emb = Recorder(pools=False)
    lines = line_units(ARCHIVE, REFS, "session")
    [out], own = encode_units(emb, [lines], context="chunk")
    assert emb.spans == [] and set(emb.read) == set(unit_texts_of(lines)) == set(out)
    assert own == {}


def test_a_unit_in_two_chunks_has_each_chunks_reading() -> None:
    """The same line in two chunks (chunk overlap) gets the vector of each chunk's pass."""
    emb = Recorder()
    shared = "[m3] user (Ann) on 8 May 2023: I run on Sundays."
    other = "[m4] assistant (Bo) on 8 May 2023: Keep your long runs slow and easy, always."
    a = line_units(shared, ["s1:m3"], "session")
    b = line_units(f"{shared}\n{other}", ["s1:m3", "s1:m4"], "session")
    (va, vb), _ = encode_units(emb, [a, b], context="chunk")
    line = a[0].text
    assert va[line] != vb[line]  # read alone vs read with the next turn


def test_token_batches_stay_within_their_padded_size() -> None:
    lengths = [250, 12, 240, 30, 8, 200, 14, 900]
    batches = token_batches(lengths, 512)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert batches[0] == [7]  # longer than a batch: alone
    for b in batches[1:]:
        assert len(b) * max(lengths[i] for i in b) <= 512  # texts × the longest
        assert 2 * min(lengths[i] for i in b) >= max(lengths[i] for i in b)  # little padding
    assert batches[1:] == [[0, 2], [5], [3], [6, 1, 4]]
    assert token_batches([], 512) == []


def test_span_masks_select_the_real_tokens_of_each_span() -> None:
    # [CLS] "Ann" ":" "hi" "." "Bye" "." [SEP]: special tokens have empty offsets
    offsets = [(0, 0), (0, 3), (3, 4), (5, 7), (7, 8), (9, 12), (12, 13), (0, 0)]
    ranges = span_ranges([[(0, 4), (5, 8)], [(9, 13)], [], [(40, 50)]])
    masks = span_mask(np.asarray(offsets), ranges)
    assert masks.tolist() == [
        [False, True, True, True, True, False, False, False],
        [False, False, False, False, False, True, True, False],
        [False] * 8,  # no range: no token (it takes the text's vector)
        [False] * 8,  # beyond the truncated text: likewise
    ]


def test_a_chunk_longer_than_the_model_reads_is_read_in_windows_of_its_lines() -> None:
    emb = Recorder()
    emb.max_seq_length = 22  # 20 words a window, a line counts one more
    lines = line_units(ARCHIVE, REFS, "session")  # 14 + 10 + 8 words
    [out], _ = encode_units(emb, [lines], context="chunk")
    assert len(emb.read) == 2  # not the whole chunk: the first line, then the other two
    assert emb.read[0] == lines[0].text
    assert emb.read[1] == f"{lines[1].text}\n{lines[2].text}"
    assert set(out) == set(unit_texts_of(lines))
