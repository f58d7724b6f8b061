"""The memory-quality metrics of bench/extraction_quality.py on a hand-made sample."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from extraction_quality import Line, score_conversation, summarise  # noqa: E402

SAMPLE = {
    "sample_id": "t",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel!"},
            {
                "speaker": "Caroline",
                "dia_id": "D1:2",
                "text": "I went to an LGBTQ support group yesterday and it was so powerful.",
            },
            {"speaker": "Melanie", "dia_id": "D1:3", "text": "Wow! I painted a lake sunrise."},
            {"speaker": "Caroline", "dia_id": "D1:4", "text": "I want to study counseling."},
        ],
    },
    "observation": {
        "session_1_observation": {
            "Caroline": [
                ["Caroline went to an LGBTQ support group and found it powerful.", "D1:2"],
                ["Caroline wants to study counseling.", "D1:4"],
            ],
            "Melanie": [["Melanie painted a lake sunrise.", "D1:3"]],
        }
    },
}


def test_fact_found_only_by_a_line_citing_its_turn_and_carrying_its_words() -> None:
    lines = [
        # carries the fact and cites its turn: found
        Line("The user went to an LGBTQ support group; it was powerful.", frozenset({"D1:2"})),
        # carries the other fact's words but cites the wrong turn: not found
        Line("The user wants to study counseling.", frozenset({"D1:2"})),
    ]
    fig = score_conversation(SAMPLE, n_nodes=1, lines=lines, sessions=1)
    assert (fig.facts, fig.facts_found) == (2, 1)  # Melanie's fact is not the user's
    # the verbatim baseline (each user turn as a line) carries both facts
    assert fig.baseline_found == 2
    assert fig.grounded_lines == 1  # the second line's words are not in the turn it cites


def test_contentless_lines_and_citation_counts() -> None:
    lines = [
        Line("Thanks, Mel! Wow, Melanie!", frozenset({"D1:1", "D1:3"})),
        Line("The user went to an LGBTQ support group.", frozenset({"D1:2"})),
    ]
    fig = score_conversation(SAMPLE, n_nodes=2, lines=lines, sessions=1)
    assert fig.contentless_lines == 1
    s = summarise([fig])
    assert s["cites_per_line_max"] == 2 and s["lines_per_session"] == 2
    assert s["contentless_line_share"] == 0.5
