"""The IDFs computed in Python key on the lexemes of PostgreSQL's `tsvector`: the Snowball
stems of `ctxpipe.core.text` are what the `english` configuration makes of the same words."""

from __future__ import annotations

import psycopg

from ctxpipe.core.text import STOPWORDS, stem, words

TEXT = (
    "Caroline's friends were painting sunrises and running charity races; the communities "
    "generously supported adoption agencies, counselling services and camping trips in 2023"
)


def test_python_stems_are_postgres_lexemes(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT array_agg(lexeme) FROM unnest(to_tsvector('english', %s))", (TEXT,)
        ).fetchone()
    assert row is not None
    postgres = set(row[0])
    python = {stem(w) for w in words(TEXT) if w not in STOPWORDS and len(w) > 1}
    python.discard("s")  # "Caroline's": PostgreSQL drops the possessive s as a stopword
    assert python <= postgres, python - postgres
    assert {"paint", "sunris", "run", "communiti", "generous", "adopt"} <= postgres
