"""A scope's own stopwords: the query words whose lexeme most of its chunks hold are searched
with by neither arm (`common_words`), and the text the vector arm embeds is the query without
them (`without_words`)."""

from __future__ import annotations

from ctxpipe.retrieval.find.common_words import common_words
from ctxpipe.retrieval.units.lexical import query_terms, without_words


def test_a_query_word_whose_lexeme_is_common_in_the_scope_is_left_out() -> None:
    terms = query_terms("What is Caroline's relationship status?")
    assert terms == ["caroline", "relationship", "status"]
    # the scope's common lexemes are PostgreSQL's (Snowball stems): "carolin"
    assert common_words(terms, {"carolin", "2023"}) == {"caroline"}
    assert common_words(terms, {"caroline"}) == set()  # a word, not its lexeme
    assert common_words(terms, set()) == set()


def test_nothing_is_left_out_where_nothing_would_be_left() -> None:
    assert common_words(["caroline"], {"carolin"}) == set()
    assert common_words(["caroline", "job"], {"carolin", "job"}) == set()


def test_the_embedded_query_leaves_out_the_common_words_and_their_possessives() -> None:
    assert without_words("What is Ann's relationship status?", {"ann"}) == (
        "What is relationship status?"
    )
    assert without_words("Where did ANN and Bo go, Ann?", {"ann"}) == "Where did and Bo go, ?"
    assert without_words("Ann’s job", {"ann"}) == "job"
    # a word that only starts like one is kept; nothing to leave out changes nothing
    assert without_words("Anne's annual plan", {"ann"}) == "Anne's annual plan"
    assert without_words("What is  Ann's job?", set()) == "What is Ann's job?"
