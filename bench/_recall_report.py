"""The tables and goals bench/locomo_recall.py prints (all conversations and the held-out
ones), and the JSON it returns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from _recall_scoring import BUDGETS, GROUNDED, Tally

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
BEST_SENTENCE = "hybrid best-sentence"
BASELINES = ("bm25", "dense", "hybrid (bm25+dense)", BEST_SENTENCE)


def fmt(x: float) -> str:
    return "  -  " if math.isnan(x) else f"{x:5.3f}"


COLUMNS = ("loose@10", *GROUNDED, *(f"aic@{b}" for b in BUDGETS), "tokens@10", "turns@10")
HELD = "held/cited"  # cited turns whose content the citing text carries, over all cited


def print_table(
    tally: Tally, convs: set[int] | None, title: str, systems: Sequence[str]
) -> dict[str, Any]:
    cats = sorted(CATEGORIES)
    n = tally.count("bm25", conversations=convs)
    print(f"\n== {title}: {n} questions (categories 1-4: " + ", ".join(
        f"{CATEGORIES[c]}={tally.count('bm25', c, convs)}" for c in cats) + ")")  # fmt: skip
    print(f"{'system':26}" + "".join(f"{c:>10}" for c in COLUMNS) + f"{HELD:>12}")
    out: dict[str, Any] = {}
    for system in systems:
        if not tally.count(system, conversations=convs):
            continue
        row = {c: tally.mean(system, c, conversations=convs) for c in COLUMNS}
        held = tally.mean(system, "held@10", conversations=convs)
        row[HELD] = held / row["turns@10"] if row["turns@10"] else math.nan
        row["per_category"] = {
            CATEGORIES[c]: {
                k: tally.mean(system, k, c, convs)
                for k in ("any@10", "loose@10", *(f"aic@{b}" for b in BUDGETS))
            }
            for c in cats
        }
        out[system] = row
        print(
            f"{system:26}"
            + "".join(
                f"{row[c]:>10.1f}" if c.startswith(("tokens", "turns")) else f"{fmt(row[c]):>10}"
                for c in COLUMNS
            )
            + f"{fmt(row[HELD]):>12}"
        )
    print(f"\n{'per category':26}" + "".join(f"{CATEGORIES[c]:>24}" for c in cats))
    print(f"{'(grounded any@10 / aic@500)':26}")
    for system, row in out.items():
        cells = [
            f"{fmt(row['per_category'][CATEGORIES[c]]['any@10'])} / "
            f"{fmt(row['per_category'][CATEGORIES[c]]['aic@500'])}"
            for c in cats
        ]
        print(f"{system:26}" + "".join(f"{x:>24}" for x in cells))
    print(f"\n{'per category, aic@200/500/1000':32}" + "".join(
        f"{CATEGORIES[c]:>20}" for c in cats))  # fmt: skip
    for system, row in out.items():
        cells = [
            "/".join(fmt(row["per_category"][CATEGORIES[c]][f"aic@{b}"]).strip()
                     for b in BUDGETS)
            for c in cats
        ]  # fmt: skip
        print(f"{system:32}" + "".join(f"{x:>20}" for x in cells))
    goals(out)
    context_goals(out)
    return out


def context_goals(out: dict[str, Any]) -> None:
    """build_context against the better of find and the best raw-turn baseline, at equal
    tokens: overall at 500 and 1,000 (+0.05), and no category below the best baseline."""
    ctx, find = out.get("build_context"), out.get("ctxpipe find")
    base = {b: out[b] for b in BASELINES if b in out}
    if not ctx or not find or not base:
        return
    for budget in BUDGETS:
        key = f"aic@{budget}"
        best_base = max(r[key] for r in base.values())
        bar = max(find[key], best_base)
        met = ctx[key] >= bar + 0.05
        print(
            f"goal build_context {key} >= max(find {find[key]:.3f}, best baseline "
            f"{best_base:.3f}) + 0.05: {ctx[key]:.3f} -> {'met' if met else 'NOT met'}"
        )
    below = [
        f"{cat} @{b}"
        for cat in CATEGORIES.values()
        for b in BUDGETS
        if ctx["per_category"][cat][f"aic@{b}"]
        < max(r["per_category"][cat][f"aic@{b}"] for r in base.values())
    ]
    print("build_context categories below the best baseline (aic): " + (
        ", ".join(below) if below else "none"))  # fmt: skip


def goals(out: dict[str, Any]) -> None:
    find = out.get("ctxpipe find")
    if not find:
        return
    base = {b: out[b] for b in BASELINES if b in out}
    best_any = max(r["any@10"] for r in base.values())
    print(
        f"goal find grounded any@10 >= best baseline + 0.05: {find['any@10']:.3f} vs "
        f"{best_any:.3f} -> {'met' if find['any@10'] >= best_any + 0.05 else 'NOT met'}"
    )
    for cat in ("multi-hop", "open-domain", "single-hop"):
        best = max(r["per_category"][cat]["aic@500"] for r in base.values())
        mine = find["per_category"][cat]["aic@500"]
        print(
            f"goal find aic@500 {cat} >= best baseline + 0.05: {mine:.3f} vs {best:.3f} -> "
            f"{'met' if mine >= best + 0.05 else 'NOT met'}"
        )
    below = [
        cat
        for cat in CATEGORIES.values()
        if find["per_category"][cat]["any@10"]
        < max(r["per_category"][cat]["any@10"] for r in base.values())
    ]
    print("categories where find's grounded any@10 is below the best baseline: " + (
        ", ".join(below) if below else "none"))  # fmt: skip
    if "ctxpipe search" in out:
        s = out["ctxpipe search"]["any@10"]
        print(
            f"goal search >= find (grounded any@10): {s:.3f} vs {find['any@10']:.3f} -> "
            f"{'met' if s >= find['any@10'] else 'NOT met'}"
        )


def report(
    tally: Tally, meta: dict[str, Any], held_out: set[int], systems: Sequence[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "meta": meta,
        "all": print_table(tally, None, "all conversations", systems),
    }
    tuned = {conv for rows in tally.rows.values() for _, conv, _ in rows} - held_out
    if held_out and tuned:  # what to tune on: never the held-out figures
        out["tuned"] = print_table(
            tally, tuned, f"tuning set (conversations {sorted(i + 1 for i in tuned)})", systems
        )
    if held_out:
        out["held_out"] = print_table(
            tally, held_out, f"held out (conversations {sorted(i + 1 for i in held_out)})", systems
        )
    for system in ("ctxpipe find", "ctxpipe search"):
        shares = tally.kind_shares(system)
        if shares:
            print(f"{system} top-10 units: " + ", ".join(
                f"{k} {v:.0%}" for k, v in shares.items()))  # fmt: skip
    return out
