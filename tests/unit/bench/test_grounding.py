"""The benchmark's honest metrics (bench/_grounding.py): a metric no test checks is not one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _grounding import (  # noqa: E402
    TurnContent,
    answer_in_context,
    best_sentence,
    contains_answer,
    content_words,
    cut_to_budget,
    grounded_turns,
)


def n_words(text: str) -> int:
    return len(text.split())


TURNS = {
    "D1:3": TurnContent.of(
        "Hey Caroline! I went to the LGBTQ support group yesterday and it was so powerful."
    ),
    "D1:4": TurnContent.of("Thanks Maria!"),
    "D2:7": TurnContent.of(
        "We finally adopted a puppy from the shelter. She is a golden retriever named Bella. "
        "My kids spend every afternoon playing fetch with her in the backyard."
    ),
}


def test_citing_a_turn_is_not_enough_its_content_must_be_returned() -> None:
    # an entity line that cites three turns but carries the words of only one of them
    text = "Caroline went to the LGBTQ support group yesterday; it was powerful."
    assert grounded_turns(text, ["D1:3", "D1:4", "D2:7"], TURNS) == {"D1:3"}


def test_a_paraphrase_without_most_of_the_turn_earns_nothing() -> None:
    assert grounded_turns("Caroline attends a community meeting.", ["D1:3"], TURNS) == set()


def test_one_whole_sentence_of_a_long_turn_is_credited() -> None:
    text = "[D2:7] She is a golden retriever named Bella."
    assert grounded_turns(text, ["D2:7"], TURNS) == {"D2:7"}
    # half a sentence is not
    assert grounded_turns("a golden retriever", ["D2:7"], TURNS) == set()


def test_a_greeting_sentence_is_too_short_to_earn_a_long_turn() -> None:
    # "Thanks Maria!" is the whole of D1:4 (most of its words) but not a sentence of D2:7
    assert grounded_turns("Thanks Maria!", ["D1:4"], TURNS) == {"D1:4"}
    assert grounded_turns("Thanks Maria!", ["D2:7"], TURNS) == set()


def test_unknown_or_uncited_turns_earn_nothing() -> None:
    full = "We finally adopted a puppy from the shelter. She is a golden retriever named Bella."
    assert grounded_turns(full, ["D9:9"], TURNS) == set()
    assert grounded_turns(full, [], TURNS) == set()


def test_content_words_keep_months_numbers_and_names() -> None:
    assert content_words("on 7 May 2023 with Melanie") == {"7", "may", "2023", "melani"}


@pytest.mark.parametrize(
    ("text", "answer", "expected"),
    [
        ("Melanie ran a charity race on 7 May 2023.", "7 May 2023", True),
        ("Melanie ran a charity race in June 2023.", "7 May 2023", False),  # 1 of 3 words
        ("She painted a sunrise over the lake", "a painting of a sunrise", True),
        ("She moved from Sweden", "Sweden", True),
        ("She is Swedish", "Sweden", False),
        ("No, she never went back.", "No", True),
        ("She did not go.", "No", False),
        ("Two cats and a dog", 2, False),  # a number is matched as the word itself
        ("She has 2 cats", 2, True),
        ("", "anything", False),
    ],
)
def test_contains_answer(text: str, answer: object, expected: bool) -> None:
    assert contains_answer(text, answer) is expected


def test_cut_to_budget_keeps_rank_order_and_cuts_the_last_text_at_a_word() -> None:
    assert cut_to_budget(["a b c", "d e f g", "h"], 5, n_words) == "a b c\nd e"
    assert cut_to_budget(["a b c"], 0, n_words) == ""
    assert cut_to_budget(["a b", "c d"], 10, n_words) == "a b\nc d"


def test_answer_beyond_the_budget_is_not_in_context() -> None:
    texts = ["filler words here", "the answer is Lisbon"]
    assert answer_in_context(texts, "Lisbon", 10, n_words)
    assert not answer_in_context(texts, "Lisbon", 5, n_words)


def test_best_sentence_picks_the_sentence_that_matches_the_query_and_caps_it() -> None:
    turn = (
        "We finally adopted a puppy from the shelter. She is a golden retriever named Bella. "
        "My kids love her."
    )
    assert best_sentence(turn, "What breed of dog is Bella?", 40, n_words).startswith(
        "She is a golden retriever"
    )
    assert n_words(best_sentence(turn, "What breed is Bella?", 3, n_words)) == 3
