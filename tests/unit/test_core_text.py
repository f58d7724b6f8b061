"""The one text module of the write and the read path: Snowball stems, sentences from pysbd,
stopwords, near-duplicates. No servers."""

from __future__ import annotations

import time

import pytest

from ctxpipe.core.text import (
    MAX_SENTENCE_CHARS,
    STOPWORDS,
    content_tokens,
    plain_sentences,
    similarity,
    split_sentences,
    stem,
    tokenize,
    words,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Dr. Smith moved to Boston. He loves it!",
            ["Dr. Smith moved to Boston.", "He loves it!"],
        ),
        ("The coffee cost $3.50 today. Worth it?", ["The coffee cost $3.50 today.", "Worth it?"]),
        ('She said "no." Then we left.', ['She said "no."', "Then we left."]),
        ("We met e.g. at the cafe. It rained.", ["We met e.g. at the cafe.", "It rained."]),
        ("line one\nline two", ["line one", "line two"]),  # a line is a hard break
        ("no end at all", ["no end at all"]),
        ("... !!!", []),  # punctuation is not a sentence
    ],
)
def test_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_no_sentence_is_longer_than_the_cap_and_splitting_stays_linear() -> None:
    wall = "word " * 40_000  # 200 kB without a full stop
    t0 = time.perf_counter()
    parts = split_sentences(wall)
    assert time.perf_counter() - t0 < 1.0
    assert parts and max(len(p) for p in parts) <= MAX_SENTENCE_CHARS
    prose = "We met at the cafe and talked. " * 3000  # 93 kB of short sentences
    t0 = time.perf_counter()
    assert len(split_sentences(prose)) == 3000
    assert time.perf_counter() - t0 < 3.0


@pytest.mark.parametrize(
    ("word", "lexeme"),
    [  # what PostgreSQL's english configuration (Snowball) makes of them
        ("sunrises", "sunris"),
        ("sunrise", "sunris"),
        ("painting", "paint"),
        ("painted", "paint"),
        ("running", "run"),
        ("communities", "communiti"),
        ("generously", "generous"),
        ("Caroline's", "carolin"),
        ("3.50", "3.50"),  # not a word: as it is
    ],
)
def test_snowball_stems(word: str, lexeme: str) -> None:
    assert stem(word) == lexeme


def test_the_c_stemmer_stems_as_the_python_one() -> None:
    """The server install stems with Snowball's C build (PyStemmer), ~30 times faster on a
    word not seen before; its stems are the pure-Python algorithm's, which the lexemes of
    PostgreSQL's english configuration are checked against above."""
    import snowballstemmer
    from snowballstemmer.english_stemmer import EnglishStemmer

    assert type(snowballstemmer.stemmer("english")).__module__ == "Stemmer"
    vocabulary = (
        "sunrises painting communities generously relational conditional hopefully "
        "organizational agreed feed skies dying lying news gently succeeding exceeded "
        "proceeding cannings inning outing howe atlas cosmos bias andes"
    ).split()
    c, python = snowballstemmer.stemmer("english"), EnglishStemmer()
    assert [c.stemWord(w) for w in vocabulary] == [python.stemWord(w) for w in vocabulary]


def test_tokens_words_and_stopwords() -> None:
    assert tokenize("I'd rather use Helix, not VS-Code!") == [
        "i'd",
        "rather",
        "use",
        "helix",
        "not",
        "vs-code",
    ]
    assert words("I'd rather use VS-Code") == ["i", "d", "rather", "use", "vs", "code"]
    assert {"the", "and", "thanks", "hello", "would"} <= STOPWORDS
    assert "support" not in STOPWORDS and "paris" not in STOPWORDS
    assert content_tokens("The painters were painting sunrises") == ["painter", "paint", "sunris"]


def test_near_duplicates() -> None:
    assert similarity("User likes dark roast coffee", "user likes coffee, dark roast") >= 0.9
    assert similarity("User likes coffee", "User likes coffee and green tea") < 0.9
    assert similarity("User lives in Berlin", "User moved to Munich") < 0.6
    assert similarity("", "anything") == 0.0


def test_threads_segment_and_stem_their_own_texts() -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"Sentence {i} is here. And {i} ends there! Dr. No {i} waits." for i in range(200)]
    expected = [split_sentences(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(split_sentences, texts)) == expected
        stems = list(pool.map(stem, ["running", "sunrises", "painted"] * 300))
    assert set(stems) == {"run", "sunris", "paint"}


@pytest.mark.parametrize(
    ("piece", "expected"),
    [
        (
            "Your help matters to me. I am writing it down.",
            ("Your help matters to me.", "I am writing it down."),
        ),
        ("It inspired me. (shared a photo)", ("It inspired me.", "(shared a photo)")),
        ('He said "go!" Then he left.', ('He said "go!"', "Then he left.")),
        ("Great! 10 people came?! Wow.", ("Great!", "10 people came?!", "Wow.")),
        ("Dr. Smith moved.", None),  # a title: pysbd decides
        ("J. K. Rowling wrote it.", None),  # an initial
        ("We met at 3 p.m. Then it rained.", None),  # a dotted word
        ("Wait... Then it rained.", None),  # an ellipsis
        ("Hi! how are you?", None),  # a lower-case word after the mark
    ],
)
def test_plain_sentence_ends_are_cut_and_doubtful_ones_left_to_pysbd(
    piece: str, expected: tuple[str, ...] | None
) -> None:
    assert plain_sentences(piece) == expected
    if expected is not None:
        assert tuple(split_sentences(piece)) == expected
