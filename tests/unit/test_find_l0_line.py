"""A memory hit's L0 line is shown above its matched line only when it adds something: a
node's one-line synthesis that opens with the very line ("Ann: Ann moved to Lisbon in May")
costs the reader its tokens twice."""

from __future__ import annotations

from ctxpipe.retrieval.find.hit_rules import restates


def test_a_synthesis_that_opens_with_the_line_restates_it() -> None:
    line = "Ann moved to Lisbon in May and works at the harbour museum now."
    assert restates(f"Ann: {line}", line)
    # the snippet cut short (in a word), the synthesis running on past it
    assert restates(f"Ann: {line[:-1]}; Ann has a brother called Tom", line[:44])
    assert restates("", line)


def test_a_line_cut_to_its_cap_is_compared_without_its_partial_last_word() -> None:
    line = "Caroline went to a support group yesterday and it was so powerful for her."
    assert restates("Caroline: Caroline went to a support group yesterday and it was so pow", line,
                    cut=True)  # fmt: skip
    assert not restates("Caroline: Caroline went to a support group today, it was so pow", line,
                        cut=True)  # fmt: skip


def test_an_l0_line_that_says_something_else_is_kept() -> None:
    line = "He was part of the family for ten years."
    assert not restates("Max: John's dog, a golden retriever", line)
    synthesis = "John: John lost their job at the company; John plays kickboxing (+12 more)"
    assert not restates(synthesis, "John volunteers as a mentor at a local school.")
    # a head that is not a subject (a long sentence with a colon in it) is not stripped
    assert not restates("The plan for the trip to the coast next spring: rent a van", "rent a van")
