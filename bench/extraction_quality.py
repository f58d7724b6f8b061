"""Memory quality on data nobody here wrote: LoCoMo dev sessions through the commit pipeline.

    .venv/bin/python bench/extraction_quality.py [--data PATH] [--limit-conversations N]
                                                 [--tuned 3] [--json OUT]

Every session of each conversation is committed in process (rules LLM by default, dedup against
the replica, the index drained after each commit — the code Celery runs), then the user's
memory nodes (profile, preferences, entities, events: `users/{speaker_a}/memories/**`) are read
back from the FS line by line, each line with the turns it cites. LoCoMo's per-session
`observation` facts about speaker_a (a fact and the turn it comes from, written by the dataset's
authors) are the reference — used to score, never read by ctxpipe.

- **fact recall**: share of the user's observation facts for which a memory line cites the
  fact's turn and carries most of the fact's content words (bench/_grounding.py);
- **precision proxies**: memory nodes and lines per session; share of memory lines *grounded*
  in their cited turns (most of the line's content words occur in the text of the turns it
  cites); turns cited per line (p50, p95, max — target max ≤ 10); *contentless* lines —
  at most one content word left once the speakers' names (and their short forms) and generic
  phatic words (greetings, thanks, praise) are removed.

Baseline in the same run: *verbatim* — every user turn stored as one memory line citing itself
(what a memory without extraction keeps). Its fact recall is the ceiling of what a line-level
store of the user's own words can reach with this strict matching; its lines are grounded by
construction. Figures for all conversations and for the held-out ones after the first `--tuned`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _locomo
import numpy as np
from _grounding import TurnContent, content_words, grounded_turns
from _stack import local_stack

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import SessionInput
from ctxpipe.core.validity import split_annotation
from ctxpipe.index.wiring import make_worker
from ctxpipe.retrieval.units.lexical import split_units
from ctxpipe.runtime import Runtime

_ID_RE = re.compile(r"D\d+:\d+")
# Generic phatic words (greetings, thanks, praise, agreement): a memory line left with at most
# one content word once these and the speakers' names are removed states nothing.
PHATIC = content_words(
    """hey hi hello thanks thank thankful wow congrats congratulations awesome cool great amazing
    glad agree agreed totally definitely sweet nice yeah yay woohoo whoa aw oh man sorry hear happy
    proud welcome bye goodbye cheers lol haha sure absolutely really much so good love lovely
    wonderful fantastic incredible beautiful stunning chat talk soon later again appreciate"""
)


@dataclass
class ConvFigures:
    sessions: int = 0
    facts: int = 0
    facts_found: int = 0
    baseline_found: int = 0
    nodes: int = 0
    lines: int = 0
    grounded_lines: int = 0
    contentless_lines: int = 0
    cited: int = 0  # turns cited by the lines
    held: int = 0  # of those, the turns whose content the citing line carries
    cites_per_line: list[int] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)


def most(needed: set[str], have: set[str]) -> bool:
    return bool(needed) and len(needed & have) * 2 > len(needed)


def turn_ids(raw: Any) -> set[str]:
    items = raw if isinstance(raw, list) else [raw]
    return {m for item in items for m in _ID_RE.findall(str(item).replace("D:", "D"))}


def user_facts(sample: dict[str, Any]) -> list[tuple[str, set[str]]]:
    """(fact, turn ids) of every observation about speaker_a."""
    user = sample["conversation"]["speaker_a"]
    out = []
    for obs in sample.get("observation", {}).values():
        for fact, ids in obs.get(user, []):
            ref = turn_ids(ids)
            if ref:
                out.append((str(fact), ref))
    return out


@dataclass(frozen=True)
class Line:
    text: str
    turns: frozenset[str]


def memory_lines(rt: Runtime, account: str, user: str) -> tuple[int, list[Line]]:
    """Every line of the user's memory nodes (L2), with the bare turn ids it cites."""
    fs = rt.fs
    root = f"ctx://{account}/users/{user}/memories"
    nodes = [uri for uri, _ in fs.walk_nodes(root)] if fs.exists(root) else []
    lines: list[Line] = []
    for uri in nodes:
        node = fs.read_node(uri)
        refs = [str(r) for r in node.source_refs]
        for unit in split_units(node.content or "", refs, derived=True):
            ids = frozenset(r.split(":", 1)[-1] for r in unit.refs)
            # the fact itself: its validity annotation (dates, superseded-by) is not content
            lines.append(Line(split_annotation(unit.text)[0], ids))
    return len(nodes), lines


def score_conversation(
    sample: dict[str, Any], n_nodes: int, lines: list[Line], sessions: int
) -> ConvFigures:
    conv = sample["conversation"]
    user = conv["speaker_a"]
    turns = {
        t["dia_id"]: _locomo.turn_text(t)
        for _, _, items in _locomo.sessions_of(conv)
        for t in items
    }
    user_turns = {
        t["dia_id"] for _, _, items in _locomo.sessions_of(conv) for t in items
        if t["speaker"] == user
    }  # fmt: skip
    fig = ConvFigures(sessions=sessions, nodes=n_nodes, lines=len(lines))
    names = content_words(f"{conv['speaker_a']} {conv['speaker_b']}")
    names |= {n[:k] for n in names for k in range(3, len(n))}  # short forms: Mel for Melanie
    line_words = [content_words(ln.text) for ln in lines]
    for fact, ids in user_facts(sample):
        want = content_words(fact) - content_words(user)  # the name is implied in a user memory
        fig.facts += 1
        if any(ln.turns & ids and most(want, lw) for ln, lw in zip(lines, line_words, strict=True)):
            fig.facts_found += 1
        elif len(fig.misses) < 5:
            fig.misses.append(fact)
        if any(most(want, content_words(turns[i])) for i in ids & user_turns if i in turns):
            fig.baseline_found += 1
    held_in = {i: TurnContent.of(text) for i, text in turns.items()}
    for ln, lw in zip(lines, line_words, strict=True):
        fig.cites_per_line.append(len(ln.turns))
        fig.cited += len(ln.turns)
        fig.held += len(grounded_turns(ln.text, ln.turns, held_in))
        cited = (
            set().union(*(content_words(turns.get(i, "")) for i in ln.turns)) if ln.turns else set()
        )
        if most(lw - content_words(user), cited):
            fig.grounded_lines += 1
        if len(lw - names - PHATIC) <= 1:
            fig.contentless_lines += 1
    return fig


def summarise(figs: Sequence[ConvFigures]) -> dict[str, float]:
    facts = sum(f.facts for f in figs)
    lines = sum(f.lines for f in figs)
    sessions = sum(f.sessions for f in figs)
    cites = [c for f in figs for c in f.cites_per_line] or [0]
    return {
        "sessions": sessions,
        "facts": facts,
        "fact_recall": sum(f.facts_found for f in figs) / facts if facts else float("nan"),
        "baseline_fact_recall": sum(f.baseline_found for f in figs) / facts if facts else 0.0,
        "nodes_per_session": sum(f.nodes for f in figs) / sessions if sessions else 0.0,
        "lines_per_session": lines / sessions if sessions else 0.0,
        "grounded_line_share": sum(f.grounded_lines for f in figs) / lines if lines else 0.0,
        "contentless_line_share": sum(f.contentless_lines for f in figs) / lines if lines else 0.0,
        "cited_and_held_share": (sum(f.held for f in figs) / max(1, sum(f.cited for f in figs))),
        "cites_per_line_p50": float(np.percentile(cites, 50)),
        "cites_per_line_p95": float(np.percentile(cites, 95)),
        "cites_per_line_max": float(max(cites)),
    }


def print_summary(title: str, s: dict[str, float]) -> None:
    ratio = s["fact_recall"] / max(1e-9, s["baseline_fact_recall"])
    print(f"\n== {title}: {s['sessions']:.0f} sessions, {s['facts']:.0f} observation facts")
    print(
        f"  fact recall                {s['fact_recall']:.3f}   "
        f"(verbatim baseline {s['baseline_fact_recall']:.3f}, ratio {ratio:.2f})"
    )
    print(f"  memory nodes / session     {s['nodes_per_session']:.1f}")
    print(f"  memory lines / session     {s['lines_per_session']:.1f}")
    print(f"  grounded lines             {s['grounded_line_share']:.3f}")
    print(
        f"  contentless lines          {s['contentless_line_share']:.3f}   "
        "(greetings, thanks, forms of address)"
    )
    print(
        f"  cited and held / cited     {s['cited_and_held_share']:.3f}   "
        "(a cited turn whose content the line carries, bench/_grounding.py)"
    )
    print(
        f"  turns cited per line       p50 {s['cites_per_line_p50']:.0f}, "
        f"p95 {s['cites_per_line_p95']:.0f}, max {s['cites_per_line_max']:.0f} "
        "(target max <= 10)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help="locomo_dev.json (read in place)")
    ap.add_argument("--limit-conversations", type=int, default=None, metavar="N")
    ap.add_argument("--tuned", type=int, default=3, metavar="N")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--show-misses", action="store_true", help="print a few missed facts")
    ap.add_argument("--dump", type=Path, default=None, help="write every memory line here")
    args = ap.parse_args(argv)
    data = _locomo.load(args.data)[: args.limit_conversations]
    started = time.perf_counter()
    figs: list[ConvFigures] = []
    with local_stack([]) as settings:
        rt = Runtime(settings)
        coord = CommitCoordinator(rt.components())
        worker = make_worker(rt, "extraction-bench")
        for sample in data:
            raws = _locomo.session_inputs(sample)
            for raw in raws:
                session = SessionInput.model_validate(raw)
                coord.commit_sync(CommitRequest.from_session(session, commit_id=raw["commit_id"]))
                worker.drain(max_seconds=600)
            n_nodes, lines = memory_lines(rt, raws[0]["account_id"], raws[0]["user_id"])
            fig = score_conversation(sample, n_nodes, lines, len(raws))
            if args.dump:
                with args.dump.open("a", encoding="utf-8") as fh:
                    for ln in lines:
                        fh.write(f"{sorted(ln.turns)}\t{ln.text}\n")
            figs.append(fig)
            print(
                f"{sample['sample_id']}: {fig.sessions} sessions, fact recall "
                f"{fig.facts_found}/{fig.facts}, {fig.lines} memory lines "
                f"({time.perf_counter() - started:.0f}s)",
                flush=True,
            )
            if args.show_misses:
                for miss in fig.misses:
                    print(f"    missed: {miss}")
        rt.close()
    out = {"all": summarise(figs)}
    print_summary("all conversations", out["all"])
    held = figs[args.tuned :]
    if held:
        out["held_out"] = summarise(held)
        print_summary(f"held out (conversations {args.tuned + 1}-{len(figs)})", out["held_out"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
