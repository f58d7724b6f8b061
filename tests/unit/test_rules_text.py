"""Text primitives of the rules provider: sentences, dates, third person, tokens."""

from __future__ import annotations

from datetime import date

import pytest

from ctxpipe.core.dates import find_dates, resolve, strip_dates
from ctxpipe.core.text import jaccard, token_set, tokenize
from ctxpipe.providers.rules.speech import rewrite, third_person
from ctxpipe.providers.rules.statements import clauses, names_in
from ctxpipe.providers.rules.text import phrases, slugify, split_sentences

TUE = date(2026, 5, 12)  # a Tuesday


def test_sentences_keep_abbreviations_and_drop_code() -> None:
    text = "Use e.g. PgBouncer. It works!\n```\nSELECT 1;\n```\nThen restart it."
    assert split_sentences(text) == ["Use e.g. PgBouncer.", "It works!", "Then restart it."]
    text = "I'm a nurse at St. Mary's Hospital in Accra. Dr. Mensah is my boss."
    assert split_sentences(text) == [
        "I'm a nurse at St. Mary's Hospital in Accra.",
        "Dr. Mensah is my boss.",
    ]


@pytest.mark.parametrize(
    ("text", "past", "iso", "grain"),
    [
        ("I ran it yesterday", True, "2026-05-11", "day"),
        ("we met last Saturday", True, "2026-05-09", "day"),
        ("she reviewed it on Friday", True, "2026-05-08", "day"),
        ("the demo is next Friday", False, "2026-05-15", "day"),
        ("we moved two days ago", True, "2026-05-10", "day"),
        ("I started three weeks ago", True, "2026-04-21", "week"),
        ("the launch is next month", False, "2026-06-12", "month"),
        ("I submitted it on March 2", True, "2026-03-02", "day"),
        ("the wedding is on June 6", False, "2026-06-06", "day"),
        ("I visited on December 20", True, "2025-12-20", "day"),
        ("signed on 14 July 2019", True, "2019-07-14", "day"),
        ("I moved here in 2019", True, "2019-05-12", "year"),
    ],
)
def test_dates_resolve_against_the_day_they_were_said(
    text: str, past: bool, iso: str, grain: str
) -> None:
    (span,) = find_dates(text, TUE, past)
    assert (span.day.isoformat(), span.grain) == (iso, grain)


def test_only_relative_dates_get_the_absolute_date_written_next_to_them() -> None:
    text, day = resolve("Last Saturday I booked flights, signed on 14 July 2019.", TUE)
    assert text == "Last Saturday (9 May 2026) I booked flights, signed on 14 July 2019."
    assert day == date(2026, 5, 9)
    assert strip_dates(text).split() == ["I", "booked", "flights,", "signed", "on", "."]
    assert resolve("I did it yesterday", None) == ("I did it yesterday", None)


def test_words_that_are_not_dates_are_not_read_as_dates() -> None:
    for text in ["We met at the cafe near the station.", "I'm a nurse", "12 apples", "May I?"]:
        assert find_dates(text, TUE) == [], text


@pytest.mark.parametrize(
    ("said", "third", "verb", "negated"),
    [
        (
            "I work at Acme and my team uses Go",
            "Ana works at Acme and their team uses Go",
            "work",
            False,
        ),
        (
            "I'm a nurse at St. Mary's Hospital in Accra.",
            "Ana is a nurse at St. Mary's Hospital in Accra.",
            "be",
            False,
        ),
        (
            "I don't need short replies anymore",
            "Ana doesn't need short replies anymore",
            "need",
            True,
        ),
        ("I still live in Lisbon", "Ana still lives in Lisbon", "live", False),
        (
            "I've been writing Go for six years",
            "Ana has been writing Go for six years",
            "write",
            False,
        ),
        ("Honestly, I can't stand jazz.", "Honestly, Ana can't stand jazz.", "stand", True),
        (
            "We went camping with my kids",
            "Ana and others went camping with their kids",
            "go",
            False,
        ),
        ("My friend told me", "Ana's friend told Ana", "", False),
    ],
)
def test_first_person_statements_in_the_third_person(
    said: str, third: str, verb: str, negated: bool
) -> None:
    r = rewrite(said, "Ana")
    assert (r.text, r.main_verb, r.negated) == (third, verb, negated)


def test_third_person_verbs_by_part_of_speech() -> None:
    assert [third_person(v) for v in ["go", "watch", "went", "can", "am", "have", "do"]] == [
        "goes",
        "watches",
        "went",
        "can",
        "is",
        "has",
        "does",
    ]


def test_clauses_with_their_own_subject_are_statements_of_their_own() -> None:
    assert clauses("I'm a data engineer at Acme and I live in Berlin.") == [
        "I'm a data engineer at Acme",
        "I live in Berlin.",
    ]
    assert clauses("Hey, I need help planning a trip.") == ["Hey, I need help planning a trip."]
    # a subordinate clause does not stand alone
    assert clauses("Every time I start a model, I write the tests first.") == [
        "Every time I start a model, I write the tests first."
    ]


def test_names_are_capitalised_runs_that_are_not_sentence_starts_or_speakers() -> None:
    assert names_in("I'm a nurse at St. Mary's Hospital in Accra with my sister Hannah.") == [
        "St. Mary's Hospital",
        "Accra",
        "Hannah",
    ]
    assert names_in("Yesterday Mel and I went to the Louvre.", ["Melanie"]) == ["Louvre"]
    assert names_in("Maria said hi.") == [] and names_in("Maria said hi.", (), {"Maria"}) == [
        "Maria"
    ]
    assert names_in("We booked Casa da Ribeira in May.") == ["Casa da Ribeira"]


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
