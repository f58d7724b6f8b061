"""The answer-in-evidence ceiling of bench/answer_ceiling.py on a hand-made sample."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from answer_ceiling import ceiling  # noqa: E402

SAMPLE = {
    "sample_id": "t",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Melanie", "dia_id": "D1:1", "text": "I painted that sunrise last year."},
            {"speaker": "Caroline", "dia_id": "D1:2", "text": "I researched adoption agencies."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "Thanks, Mel!"},
        ],
    },
    "qa": [
        {"question": "When did Melanie paint a sunrise?", "answer": 2022, "evidence": ["D1:1"],
         "category": 2},
        {"question": "What did Caroline research?", "answer": "Adoption agencies",
         "evidence": ["D1:2"], "category": 4},
        {"question": "What is Caroline's job?", "answer": "counselor", "evidence": ["D1:3"],
         "category": 4},
        {"question": "Unanswerable", "answer": "x", "evidence": ["D1:2"], "category": 5},
        {"question": "No evidence", "answer": "x", "evidence": ["D9:9"], "category": 4},
    ],
}  # fmt: skip


def test_the_ceiling_counts_answers_in_the_evidence_as_said_and_dated() -> None:
    rows = ceiling([SAMPLE], tuned=1)
    # "last year" holds 2022 only once it is resolved against 8 May 2023; the answer that is
    # in no evidence turn counts for neither; category 5 and unknown evidence are left out
    assert rows["tuning"] == [1, 2, 3]
    assert rows["tuning temporal"] == [0, 1, 1]
    assert rows["tuning single-hop"] == [1, 1, 2]
    assert "held out" not in rows


def test_conversations_after_the_tuned_ones_are_held_out() -> None:
    rows = ceiling([SAMPLE], tuned=0)
    assert rows["held out"] == [1, 2, 3]
    assert "tuning" not in rows
