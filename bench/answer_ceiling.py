"""How often the gold answer is in the evidence turns themselves: the ceiling of answer-in-context
for any system that returns turns (or lines made of them) — and what resolving relative dates
adds to it.

    .venv/bin/python bench/answer_ceiling.py [PATH/TO/locomo_dev.json] [--tuned 3]

For every question of categories 1-4 with evidence, the evidence turns (each with its speaker
and session date, as the archive shows them) are joined and judged by the answer-in-context
rule of `_grounding.contains_answer`, once as said and once with their relative dates made
absolute the way `build_context` shows them ("last year (2022)"). A system whose context held
every evidence turn and nothing else would score this; more is possible only from other turns
or memory lines that restate the answer. Figures per split (tuning set / held out) and category.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _locomo
from _grounding import contains_answer
from _locomo import evidence_ids
from _recall_report import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.retrieval.context.dated_lines import dated_text  # noqa: E402

Ceiling = dict[str, list[int]]  # split or "split category" -> [as said, dated, questions]


def evidence_turns(sample: dict[str, Any]) -> dict[str, tuple[str, str, Any]]:
    """Turn id -> (header, text, the day it was said)."""
    return {
        t["dia_id"]: (f"{t['speaker']} ({d.day} {d:%B %Y}): ", _locomo.turn_text(t), d.date())
        for _, d, items in _locomo.sessions_of(sample["conversation"])
        for t in items
    }


def ceiling(data: Sequence[dict[str, Any]], tuned: int) -> Ceiling:
    out: Ceiling = defaultdict(lambda: [0, 0, 0])
    for index, sample in enumerate(data):
        turns = evidence_turns(sample)
        split = "tuning" if index < tuned else "held out"
        for qa in sample["qa"]:
            cat = int(qa.get("category", 0))
            ids = sorted(evidence_ids(qa.get("evidence", [])) & turns.keys())
            if cat not in CATEGORIES or not ids:
                continue
            said = "\n".join(turns[i][0] + turns[i][1] for i in ids)
            dated = "\n".join(turns[i][0] + dated_text(turns[i][1], turns[i][2]) for i in ids)
            answer = qa.get("answer", "")
            for key in (split, f"{split} {CATEGORIES[cat]}"):
                row = out[key]
                row[0] += contains_answer(said, answer)
                row[1] += contains_answer(dated, answer)
                row[2] += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("data", type=Path, nargs="?", default=None, help="locomo_dev.json")
    ap.add_argument("--tuned", type=int, default=3, metavar="N")
    args = ap.parse_args(argv)
    rows = ceiling(_locomo.load(args.data), args.tuned)
    print(f"{'answer in the evidence turns':34} {'as said':>8} {'dated':>8} {'questions':>10}")
    for key in sorted(rows, key=lambda k: (k.startswith("held"), " " in k, k)):
        said, dated, n = rows[key]
        print(f"{key:34} {said / n:8.3f} {dated / n:8.3f} {n:10d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
