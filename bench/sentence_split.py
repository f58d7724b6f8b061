"""Sentence boundaries: the plain rule of `ctxpipe.core.text` against pysbd, on LoCoMo turns
(the benchmark's data, read in place) — speed and where they differ.

    .venv/bin/python bench/sentence_split.py [PATH/TO/locomo_dev.json]

Every turn is cut into the pieces `split_sentences` segments (a line, at most ~1,500
characters); for the pieces with a sentence end inside them, both are run cold and timed: the
plain rule (`plain_sentences`, None where a full stop may end an abbreviation, an initial or a
dotted word, or a lower-case word follows: those pieces go to pysbd) and pysbd alone. Prints
the time per piece of each, the share of pieces that fall back to pysbd, the agreement where
the rule decides, and the commonest boundaries the two place differently (the word before and
the character after), so the differences can be read.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "bench"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import pysbd  # noqa: E402
from _locomo import load, session_inputs  # noqa: E402

from ctxpipe.core import text  # noqa: E402


def boundaries(piece: str, sentences: tuple[str, ...]) -> set[int]:
    """Where each sentence after the first starts in `piece`."""
    out, cursor = set(), 0
    for s in sentences:
        at = piece.find(s, cursor)
        if at < 0:
            continue
        if at > 0:
            out.add(at)
        cursor = at + len(s)
    return out


def pattern(piece: str, at: int) -> str:
    before = piece[:at].rstrip().rsplit(None, 1)
    return f"{before[-1][-12:] if before else ''!r} → {piece[at : at + 1]!r}"


def main() -> None:
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    turns = [
        m["content"] for s in load(data) for sess in session_inputs(s) for m in sess["messages"]
    ]
    pieces = [
        p
        for t in turns
        for line in t.splitlines()
        if line.strip()
        for p in text._pieces(line.strip())
    ]
    inner = [p for p in pieces if text._INNER_END_RE.search(p.rstrip()[:-1])]
    started = time.perf_counter()
    rule = [text.plain_sentences(p) for p in inner]
    rule_s = time.perf_counter() - started
    seg = pysbd.Segmenter(language="en", clean=False)
    started = time.perf_counter()
    ref = [tuple(s.strip() for s in seg.segment(p) if s.strip()) for p in inner]
    pysbd_s = time.perf_counter() - started
    decided = [(p, r, g) for p, r, g in zip(inner, rule, ref, strict=True) if r is not None]
    agree = sum(r == g for _, r, g in decided)
    only_rule: Counter[str] = Counter()
    only_pysbd: Counter[str] = Counter()
    for p, r, g in decided:
        if r != g:
            mine, theirs = boundaries(p, r), boundaries(p, g)
            only_rule.update(pattern(p, at) for at in mine - theirs)
            only_pysbd.update(pattern(p, at) for at in theirs - mine)
    n = len(inner)
    print(f"LoCoMo turns {len(turns)}, pieces {len(pieces)}, with a sentence end inside {n}")
    print(f"plain rule: {rule_s / n * 1e6:8.1f} µs a piece")
    print(f"pysbd:      {pysbd_s / n * 1e6:8.1f} µs a piece ({pysbd_s / rule_s:.0f} × the rule)")
    fallback = n - len(decided)
    print(f"pieces the rule leaves to pysbd: {fallback} ({fallback / n:.1%})")
    print(
        f"pieces the rule decides: {len(decided)}; the same sentences as pysbd: {agree} "
        f"({agree / max(len(decided), 1):.1%})"
    )
    print(f"boundaries only the rule places ({sum(only_rule.values())}), commonest:")
    for key, count in only_rule.most_common(8):
        print(f"  {count:4d}  {key}")
    print(f"boundaries only pysbd places ({sum(only_pysbd.values())}), commonest:")
    for key, count in only_pysbd.most_common(8):
        print(f"  {count:4d}  {key}")


if __name__ == "__main__":
    main()
