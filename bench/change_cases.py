"""Changes and reversals through the commit pipeline: the share of cases handled.

    .venv/bin/python bench/change_cases.py [--cases tests/data/changes_heldout.yaml]

Each case is two sessions of one user, committed in process (rules LLM, real ContextFS, no
database): `before` leaves memory lines, `after` is said a month later. Handled means:

- `supersede`: a line of the user's profile or preference memories (the ones that carry
  validity) that carries the `old` word is closed (``valid … until``, ``superseded:``), and a
  valid line of the user's memories carries the `new` word;
- `accumulate`: a valid profile or preference line carries `old`, none that carries `old` was
  closed, and a valid line of the user's memories (any category: an event, an entity) carries
  `new`.

The held-out file is the figure to report: no rule is fitted to it (the development cases are
in its sibling, changes_dev.yaml).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ctxpipe.commit.coordinator import CommitCoordinator
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.core.session import RequestContext
from ctxpipe.core.validity import split_annotation
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime

HERE = Path(__file__).resolve().parents[1]
HELD_OUT = HERE / "tests/data/changes_heldout.yaml"
DEV = HERE / "tests/data/changes_dev.yaml"
USER_ROOT = "ctx://acme/users/alice/memories"


@dataclass
class Outcome:
    case: dict[str, Any]
    handled: bool
    lines: list[str]  # profile and preference lines
    others: list[str]  # the user's other memory lines (events, entities)


def load_cases(path: Path) -> list[dict[str, Any]]:
    return list(yaml.safe_load(path.read_text(encoding="utf-8")))


def _request(text: str, n: int, day: str) -> CommitRequest:
    ctx = RequestContext(account_id="acme", user_id="alice", agent_id="helper", session_id=f"s{n}")
    messages = [
        {"id": f"u{n}", "role": "user", "content": text, "created_at": f"{day}T10:00:00Z"},
        {"id": f"a{n}", "role": "assistant", "content": "Thanks for telling me."},
    ]
    return CommitRequest(commit_id=f"c{n}", ctx=ctx, messages=messages)  # type: ignore[arg-type]


def memory_lines(rt: Runtime, folders: tuple[str, ...] = ("profile", "preferences")) -> list[str]:
    """Every bullet line of the user's memories in `folders`."""
    out: list[str] = []
    for folder in folders:
        root = f"{USER_ROOT}/{folder}"
        if not rt.fs.exists(root):
            continue
        uris = [root] if folder == "profile" else [u for u, _ in rt.fs.walk_nodes(root)]
        for uri in uris:
            content = rt.fs.read_node(uri).content or ""
            out.extend(ln.strip() for ln in content.splitlines() if ln.strip().startswith("-"))
    return out


def _has(line: str, word: str) -> bool:
    return bool(re.search(rf"\b{re.escape(word.lower())}", split_annotation(line)[0].lower()))


def judge(case: dict[str, Any], lines: list[str], others: Sequence[str] = ()) -> bool:
    """`lines`: the profile and preference lines; `others`: the user's other memory lines."""
    valid = [ln for ln in lines if not split_annotation(ln)[1].closed]
    closed = [ln for ln in lines if split_annotation(ln)[1].closed]
    old, new = str(case["old"]), str(case["new"])
    new_valid = any(_has(ln, new) for ln in [*valid, *others])
    if case["expect"] == "supersede":
        return any(_has(ln, old) for ln in closed) and new_valid
    return (
        any(_has(ln, old) for ln in valid) and new_valid and not any(_has(ln, old) for ln in closed)
    )


def run_case(case: dict[str, Any], workdir: Path) -> Outcome:
    settings = Settings(fs_root=workdir / "fs", var_dir=workdir / "var")
    rt = Runtime(settings, llm=RulesLLM(), use_database=False)
    coordinator = CommitCoordinator(rt.components())
    coordinator.commit_sync(_request(str(case["before"]), 1, "2024-03-01"))
    coordinator.commit_sync(_request(str(case["after"]), 2, "2024-04-02"))
    lines = memory_lines(rt)
    others = memory_lines(rt, ("events", "entities"))
    rt.close()
    return Outcome(case, judge(case, lines, others), lines, others)


def run_all(path: Path) -> list[Outcome]:
    out = []
    for case in load_cases(path):
        with tempfile.TemporaryDirectory() as tmp:
            out.append(run_case(case, Path(tmp)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=Path, default=HELD_OUT)
    ap.add_argument("--verbose", action="store_true", help="print the lines of every case")
    args = ap.parse_args(argv)
    outcomes = run_all(args.cases)
    handled = [o for o in outcomes if o.handled]
    for kind in ("supersede", "accumulate"):
        of_kind = [o for o in outcomes if o.case["expect"] == kind]
        ok = sum(o.handled for o in of_kind)
        print(f"{kind:10s} {ok}/{len(of_kind)}")
    print(f"handled    {len(handled)}/{len(outcomes)} = {len(handled) / max(1, len(outcomes)):.3f}")
    for o in outcomes:
        if not o.handled or args.verbose:
            mark = "ok " if o.handled else "NOT"
            print(
                f"{mark} {o.case['id']} ({o.case['expect']}): {o.case['before']!r} -> "
                f"{o.case['after']!r}"
            )
            for ln in o.lines:
                print(f"      {ln}")
            for ln in o.others:
                print(f"      (other) {ln}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
