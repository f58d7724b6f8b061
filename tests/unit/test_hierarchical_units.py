"""Sentence ranking inside find's candidates (chunk → line → sentence score propagation) and
what each returned unit cites. A deterministic bag-of-words embedder; no servers."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpipe.retrieval.models import CandidateRow
from ctxpipe.retrieval.units.bm25 import bm25, bm25_bags, join_bags, term_bags
from ctxpipe.retrieval.units.lexical import (
    bm25_tokens,
    query_terms,
    split_units,
    tsquery_or,
    unit_key,
)
from ctxpipe.retrieval.units.sentence_ranking import (
    explode,
    rank_sentences,
    stemmed_idf,
)
from ctxpipe.retrieval.units.unit_vectors import UnitVectors

ARCHIVE = (
    "[D1:1] user (Caroline): Hey Mel! Good to see you.\n"
    "[D1:2] assistant (Melanie): Hi! I painted a lake sunrise last year. It was calming.\n"
    "[D1:3] user (Caroline): I went to a support group yesterday; it was powerful."
)
REFS = ["s1:D1:1", "s1:D1:2", "s1:D1:3"]


class BagEmbedder:
    model_name = "bag"
    dimension = 64

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        out = []
        for t in texts:
            v = np.zeros(self.dimension)
            for w in bm25_tokens(t):
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dimension] += 1
            n = np.linalg.norm(v)
            out.append(list(v / n) if n else list(v))
        return out


def row(
    text: str, refs: list[str], ctype: str = "session", rrf: float = 0.03, **kw: Any
) -> CandidateRow:
    return CandidateRow(
        chunk_id=f"c{abs(hash(text))}", uri="ctx://a/x", level=2, chunk_index=0, rrf=rrf, sim=0.5,
        text_content=text, source_refs=refs, context_type=ctype, **kw,
    )  # fmt: skip


def test_archive_lines_cite_their_turn_and_keep_the_speaker() -> None:
    units = split_units(ARCHIVE, REFS, derived=False)
    assert [u.refs for u in units] == [["s1:D1:1"], ["s1:D1:2"], ["s1:D1:3"]]
    assert units[1].text.startswith("Melanie: Hi!") and units[1].prefix == "Melanie: "
    sents = units[1].sentences()
    assert [s.text for s in sents] == [
        "Melanie: Hi!",
        "Melanie: I painted a lake sunrise last year.",
        "Melanie: It was calming.",
    ]
    assert all(s.refs == ["s1:D1:2"] for s in sents)


def test_a_dated_archive_line_returns_its_speaker_and_date_with_every_sentence() -> None:
    from datetime import UTC, datetime

    from ctxpipe.commit.archive_builder import spoken_on

    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    said = "I painted a lake sunrise. It was calming."
    line = f"[D1:2] assistant (Melanie){spoken_on(when)}: {said}"
    assert line.startswith("[D1:2] assistant (Melanie) on 8 May 2023: ")
    (unit,) = split_units(line, ["s1:D1:2"], derived=False)
    assert unit.prefix == "Melanie (8 May 2023): " and unit.refs == ["s1:D1:2"]
    assert [s.text for s in unit.sentences()] == [
        "Melanie (8 May 2023): I painted a lake sunrise.",
        "Melanie (8 May 2023): It was calming.",
    ]
    assert spoken_on(None) == ""  # a message without a time: the line as before


def test_memory_lines_cite_markers_or_what_the_memory_derives_from() -> None:
    text = "- The user went to a support group. [s1:D1:3]\n- date: 2023-05-07 (from 'yesterday')"
    units = split_units(text, ["s1:D1:3", "s2:D2:1"], derived=True)
    assert units[0].text == "The user went to a support group." and units[0].refs == ["s1:D1:3"]
    assert units[1].refs == ["s1:D1:3", "s2:D2:1"]  # no marker: the whole derivation
    # bare ids are qualified with the chunk's refs; unknown ids cite nothing
    assert split_units("- x [D2:1]", ["s2:D2:1"], derived=False)[0].refs == ["s2:D2:1"]
    assert split_units("- x [zz9]", ["s2:D2:1"], derived=False)[0].refs == []


def test_summary_lines_of_an_archive_are_not_returned() -> None:
    rows = [row("User: the group was powerful. We talked about painting.", REFS, rrf=0.05)]
    assert explode(rows).sentences == []  # a summary cites no turn
    rows = [row("An unsourced resource paragraph. Second sentence.", [], ctype="resource")]
    assert len(explode(rows).sentences) == 2  # nothing to cite: kept


def test_query_terms_and_tsquery() -> None:
    terms = query_terms("When did Melanie paint a sunrise, and what's the sunrise like?")
    assert terms == ["melanie", "paint", "sunrise"]
    assert tsquery_or(terms) == "melanie | paint | sunrise"
    assert tsquery_or(["ok", "bad term", "x'y"]) == "ok"


def test_bm25_prefers_rare_terms_and_short_units() -> None:
    docs = [bm25_tokens("lake sunrise painting"), bm25_tokens("lake " * 8 + "boat"), []]
    scores = bm25(docs, stemmed_idf({"sunrises": 2.0, "lake": 0.2}))
    assert scores[0] > scores[1] > scores[2] == 0


@settings(deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=12), min_size=1, max_size=8),
    st.dictionaries(st.sampled_from("abcdxyz"), st.floats(0.01, 5.0), max_size=5),
)
def test_bm25_is_the_formula(docs: list[list[str]], idf: dict[str, float]) -> None:
    """Okapi BM25 (k1 1.2, b 0.75, lengths against the docs' mean) of every doc, written out."""
    got = bm25(docs, idf)
    mean = max(1.0, sum(map(len, docs)) / len(docs))
    for doc, score in zip(docs, got, strict=True):
        norm = 1.2 * (1 - 0.75 + 0.75 * len(doc) / mean)
        want = sum(w * doc.count(t) * 2.2 / (doc.count(t) + norm) for t, w in idf.items())
        assert score == pytest.approx(want, rel=1e-5, abs=1e-6)


@settings(deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=12), min_size=1, max_size=9),
    st.integers(1, 4),
    st.dictionaries(st.sampled_from("abcdxyz"), st.floats(0.01, 5.0), max_size=5),
)
def test_bags_joined_part_by_part_score_as_the_whole(
    docs: list[list[str]], parts: int, idf: dict[str, float]
) -> None:
    """find keeps each chunk's bags of words and joins those of its candidates: the joined
    bags score every document as BM25 over all the documents at once does."""
    cut = [docs[i::parts] for i in range(parts)]
    whole = [d for part in cut for d in part]
    joined = join_bags([term_bags([Counter(d) for d in part], map(len, part)) for part in cut])
    assert len(joined) == len(whole)
    np.testing.assert_array_equal(bm25_bags(joined, idf), bm25(whole, idf))


def test_the_candidates_lines_and_sentences_are_scored_by_their_own_words() -> None:
    rows = [
        row(ARCHIVE, REFS),
        row("[D2:1] user (Caroline): My dog likes the lake. It swims far.", ["s2:D2:1"]),
    ]
    ex = explode(rows)
    idf = stemmed_idf({"lake": 1.0, "swims": 2.0, "sunrise": 0.5})
    np.testing.assert_array_equal(
        bm25_bags(ex.sent_bags, idf), bm25([bm25_tokens(u.text) for u in ex.units], idf)
    )
    np.testing.assert_array_equal(
        bm25_bags(ex.line_bags, idf), bm25([bm25_tokens(u.text) for u in ex.lines], idf)
    )
    assert bm25_bags(ex.sent_bags, idf).max() > 0


def _ranked(second: str, query: str, idf: dict[str, float]) -> tuple[Any, Any]:
    """The exploded candidates (the archive chunk and a turn of Caroline's, `second`) and
    their sentences ranked for `query`."""
    emb = BagEmbedder()
    rows = [row(ARCHIVE, REFS, rrf=0.03), row(second, ["s2:D2:1"], rrf=0.01)]
    ex = explode(rows)
    q = np.asarray(emb.encode([query])[0], dtype=np.float32)
    return ex, rank_sentences(rows, ex, q, idf, UnitVectors(emb))  # type: ignore[arg-type]


def test_sentences_are_ranked_by_themselves_their_line_and_their_chunk() -> None:
    _, ranked = _ranked(
        "[D2:1] user (Caroline): My dog likes the lake.",
        "When did Melanie paint a sunrise?",
        {"melanie": 0.5, "paint": 2.0, "sunrise": 2.5},
    )
    best = ranked[0]
    assert best.unit.text == "Melanie: I painted a lake sunrise last year."
    assert best.unit.refs == ["s1:D1:2"] and best.similarity > 0
    # a sentence of the better chunk outranks the same kind of sentence elsewhere
    scores = {s.unit.text: s.score for s in ranked}
    assert scores["Melanie: It was calming."] > scores["Caroline: My dog likes the lake."] or (
        scores["Caroline: My dog likes the lake."] > 0
    )


def test_every_sentence_is_ranked_once_best_first() -> None:
    """The ranking reads the candidates' sentences as columns and makes a `Sentence` when one
    is read: every sentence once, by score, ties by chunk then line; read by index or slice
    the same as in order."""
    ex, ranked = _ranked(
        "[D2:1] user (Caroline): My dog likes the lake. It swims far.",
        "Where does the dog swim?",
        {"dog": 1.0, "swim": 2.0},
    )
    listed = list(ranked)
    assert len(ranked) == len(listed) == len(ex.sentences) > 3
    assert sorted((s.row, s.line, s.unit.text) for s in listed) == sorted(
        (s.row, s.line, s.unit.text) for s in ex.sentences
    )
    keys = [(-s.score, s.row, s.line) for s in listed]
    assert keys == sorted(keys)
    assert listed[0].unit.text == "Caroline: It swims far."
    assert ranked[0] == listed[0] and ranked[-1] == listed[-1] and ranked[1:3] == listed[1:3]
    with pytest.raises(IndexError):
        ranked[len(listed)]


def test_unit_vectors_are_cached_and_whole_chunks_reuse_their_embedding() -> None:
    emb = BagEmbedder()
    vectors = UnitVectors(emb)
    single = "[D3:1] user (Ann): Atlas runs on PostgreSQL."
    stored = emb.encode(["Ann: Atlas runs on PostgreSQL."])[0]
    rows = [row(single, ["s3:D3:1"], embedding=np.asarray(stored, dtype=np.float32))]
    q = np.asarray(stored, dtype=np.float32)
    emb.calls = 0
    rank_sentences(rows, explode(rows), q, {"atlas": 1.0}, vectors)  # type: ignore[arg-type]
    assert emb.calls == 1  # the rendered line differs from the raw chunk text: encoded once
    rank_sentences(rows, explode(rows), q, {"atlas": 1.0}, vectors)  # type: ignore[arg-type]
    assert emb.calls == 1  # cached
    plain = [row("Atlas runs on PostgreSQL.", [], ctype="resource",
                 embedding=np.asarray(stored, dtype=np.float32))]  # fmt: skip
    emb.calls = 0
    rank_sentences(plain, explode(plain), q, {"atlas": 1.0}, UnitVectors(emb))  # type: ignore[arg-type]
    assert emb.calls == 0  # the line is the chunk: its stored vector is used


def test_stored_unit_vectors_rank_as_the_same_vectors_cached_do() -> None:
    """The ranking reads the stored vectors of the dense lines and sentences by their keys;
    with one of them not stored it looks each up in the cache instead: the same vectors give
    the same scores and similarities either way, and the model is not called."""
    emb = BagEmbedder()
    rows = [
        row(ARCHIVE, REFS, rrf=0.03),
        row("[D2:1] user (Caroline): My dog likes the lake. It swims far.", ["s2:D2:1"]),
    ]
    ex = explode(rows)
    units = [(rows[r].chunk_id, u.text) for r, u in zip(ex.line_row, ex.lines, strict=True)]
    units += [(rows[int(r)].chunk_id, u.text) for r, u in zip(ex.row, ex.units, strict=True)]
    vec = {u: np.asarray(emb.encode([u[1]])[0], dtype=np.float32) for u in units}
    stored: dict[str, dict[str, np.ndarray]] = {}
    for (cid, text), v in vec.items():
        stored.setdefault(cid, {})[unit_key(text)] = v
    q = np.asarray(emb.encode(["Where does the dog swim at the lake?"])[0], dtype=np.float32)
    idf = {"dog": 1.0, "swim": 2.0, "lake": 0.5}
    emb.calls = 0
    every = rank_sentences(rows, ex, q, idf, UnitVectors(emb), stored=stored)  # type: ignore[arg-type]
    cid, text = units[-1]  # a sentence of the second chunk, not stored: found in the cache
    del stored[cid][unit_key(text)]
    cached = UnitVectors(emb)  # type: ignore[arg-type]
    cached.put(cid, text, vec[(cid, text)])
    some = rank_sentences(rows, ex, q, idf, cached, stored=stored)
    assert emb.calls == 0
    assert [(s.unit.text, s.score, s.similarity) for s in every] == [
        (s.unit.text, s.score, s.similarity) for s in some
    ]
    assert max(s.similarity for s in every) > 0
