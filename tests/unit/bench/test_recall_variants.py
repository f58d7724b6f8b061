"""The variants of bench/locomo_recall.py: a context variant may also change the finder it
retrieves with (``find.`` keys), so that a read-side change of `find` is measured on
`build_context` against the old behaviour in the same run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from _recall_variants import parse_context_variant, parse_variant  # noqa: E402


def test_context_and_finder_values_are_parsed_and_validated_apart() -> None:
    update = parse_context_variant("replies=false,find.common_word_ratio=0,find.dense_rows=32")
    assert update == {
        "replies": False,
        "find.common_word_ratio": 0.0,
        "find.dense_rows": 32,
    }
    assert parse_context_variant("find.top_k=5") == {"find.top_k": 5}
    assert parse_variant("dense_rows=8") == {"dense_rows": 8}


@pytest.mark.parametrize("spec", ["find.nope=1", "nope=1", "find.dense_rows=-1", "replies="])
def test_an_unknown_or_invalid_value_is_refused(spec: str) -> None:
    with pytest.raises((SystemExit, ValueError)):
        parse_context_variant(spec)
