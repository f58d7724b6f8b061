"""Text primitives of the rules provider: sentences, dates, third person, tokens."""

from __future__ import annotations

from datetime import date

import pytest

from ctxpipe.providers.rules.dates import PATTERNS, absolutize, best_date, find_dates, has_date
from ctxpipe.providers.rules.grammar import tense, to_third_person
from ctxpipe.providers.rules.text import (
    jaccard,
    phrases,
    slugify,
    split_sentences,
    token_set,
    tokenize,
)

TUE = date(2026, 5, 12)  # a Tuesday


def test_sentences_keep_abbreviations_and_drop_code() -> None:
    text = "Use e.g. PgBouncer. It works!\n```\nSELECT 1;\n```\nThen restart it."
    assert split_sentences(text) == ["Use e.g. PgBouncer.", "It works!", "Then restart it."]


@pytest.mark.parametrize(
    ("text", "tense_", "iso", "precision"),
    [
        ("I ran it yesterday", "past", "2026-05-11", "day"),
        ("we met last Saturday", "past", "2026-05-09", "day"),
        ("she reviewed it on Friday", "past", "2026-05-08", "day"),
        ("the demo is next Friday", "future", "2026-05-15", "day"),
        ("I started three weeks ago", "past", "2026-04-20", "week"),
        ("we moved two days ago", "past", "2026-05-10", "day"),
        ("the launch is next month", "future", "2026-06-01", "month"),
        ("I submitted it on March 2", "past", "2026-03-02", "day"),
        ("the wedding is on June 6", "future", "2026-06-06", "day"),
        ("I visited on December 20", "past", "2025-12-20", "day"),
        ("on 2024-02-29 it broke", "past", "2024-02-29", "day"),
        ("signed on 14 July 2019", "past", "2019-07-14", "day"),
    ],
)
def test_date_resolution(text: str, tense_: str, iso: str, precision: str) -> None:
    d = best_date(find_dates(text, TUE, tense_))
    assert d is not None and d.iso == iso and d.precision == precision


def test_a_sentence_without_a_date_is_not_read_pattern_by_pattern() -> None:
    """`has_date` is every date pattern at once: it finds what any of them finds, and a
    sentence it finds nothing in has no date mention."""
    dated = [
        "on 2024-02-29 it broke",
        "due 3/4/2025",
        "on March 2nd",
        "the 14th of July",
        "the day before yesterday",
        "the day after tomorrow",
        "last night",
        "this morning",
        "tomorrow",
        "two weeks ago",
        "in three days",
        "this past Friday",
        "next weekend",
        "since May 2021",
        "back in 2019",
    ]
    for text in dated:
        assert has_date(text) and find_dates(text, TUE, "past"), text
    assert {kind for text in dated for kind, p in PATTERNS if p.search(text)} == {
        kind for kind, _ in PATTERNS
    }
    for text in ["We met at the cafe near the station.", "a", "I'm a nurse", "12 apples"]:
        assert not has_date(text) and find_dates(text, TUE) == []


def test_no_anchor_leaves_relative_dates_unresolved() -> None:
    (d,) = find_dates("I did it yesterday", None, "past")
    assert d.value is None and d.relative
    assert find_dates("you may 3x the speed", TUE) == []  # "may" the verb, not the month


def test_absolutize_replaces_relative_expressions() -> None:
    s = "Last Saturday I booked flights and next month I fly."
    out = absolutize(s, find_dates(s, date(2026, 4, 20), "past"))
    assert out == "on 2026-04-18 I booked flights and in May 2026 I fly."


def test_tense_and_third_person() -> None:
    assert tense("I shipped v2 yesterday") == "past"
    assert tense("I'm flying to Tokyo next week") == "future"
    assert tense("I'm interested in Rust") is None
    assert to_third_person("I work at Acme and my team uses Go") == (
        "The user works at Acme and the user's team uses Go"
    )
    assert to_third_person("I just finished my thesis, we celebrated") == (
        "The user just finished the user's thesis, the team celebrated"
    )


def test_tokens_slugs_and_phrases() -> None:
    assert tokenize("psycopg2.OperationalError: can't connect") == [
        "psycopg2.operationalerror",
        "can't",
        "connect",
    ]
    assert tokenize("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡"]  # CJK → bigrams
    assert jaccard(token_set("我喜欢咖啡"), token_set("我喜欢咖啡!")) == 1.0
    assert slugify("Tomás Silva's PR") == "tomas-silva-s-pr"
    assert phrases("We tried PgBouncer in transaction mode and the errors are gone") == [
        "PgBouncer",
        "transaction mode",
        "errors",
    ]
