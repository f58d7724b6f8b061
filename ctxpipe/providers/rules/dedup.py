"""`policy.dedup_decision`: create / skip / merge_existing from lexical overlap + vector score.

Lexical measures are over stemmed content tokens: Jaccard(candidate, existing) and the
containment of the candidate in the existing node (1.0 = the candidate adds no new token).
Lines the existing node marks as superseded do not count as existing knowledge.

- events / cases (append-only): skip only when near-identical — similarity > 0.95 with the
  candidate contained (≥ 0.9) and no new number/date, or Jaccard ≥ 0.95; otherwise create.
- mergeable categories: skip when the candidate adds no new content token (and is similar
  at all); merge_existing when similarity ≥ 0.85 or the texts overlap strongly (Jaccard ≥ 0.6
  or containment ≥ 0.8); otherwise create.
"""

from __future__ import annotations

from typing import Any

from ctxpipe.core.text import containment, jaccard, token_set
from ctxpipe.providers.rules.lines import parse_lines

APPEND_ONLY = frozenset({"events", "cases"})
SIMILAR = 0.85
NEAR_IDENTICAL = 0.95


def dedup_decision(variables: dict[str, Any]) -> dict[str, Any]:
    var = {name: str(value or "") for name, value in variables.items()}
    category, sim = var.get("category", ""), float(variables.get("similarity") or 0.0)
    cand = token_set(f"{var.get('candidate_abstract', '')}\n{var.get('candidate_content', '')}")
    existing = parse_lines(var.get("existing_content", ""))
    active = "\n".join(ln.text for ln in existing if ln.active)  # superseded lines do not count
    exist = token_set(f"{var.get('existing_abstract', '')}\n{active}")
    j = jaccard(cand, exist)
    cont = containment(cand, exist)
    new = sorted(cand - exist)
    new_numbers = [t for t in new if any(c.isdigit() for c in t)]
    shown = ", ".join(new[:6]) + ("…" if len(new) > 6 else "")
    numbers = (
        f"similarity {sim:.2f}, Jaccard {j:.2f}, containment {cont:.2f}, "
        f"{len(new)} new token(s){': ' + shown if new else ''}"
    )
    if category in APPEND_ONLY:
        near = (sim > NEAR_IDENTICAL and cont >= 0.9 and not new_numbers) or j >= NEAR_IDENTICAL
        if near:
            decision, why = "skip", f"near-identical {category} entry"
        elif new_numbers and sim > NEAR_IDENTICAL:
            decision, why = "create", f"different date/number ({', '.join(new_numbers[:3])})"
        else:
            decision, why = "create", f"{category} are append-only and this one differs"
    elif not new and (sim >= 0.5 or j >= 0.3):
        decision, why = "skip", "the candidate adds no new content"
    elif sim >= SIMILAR or j >= 0.6 or cont >= 0.8:
        decision, why = "merge_existing", "same subject with new details"
    else:
        decision, why = "create", "different subject"
    return {"decision": decision, "reason": f"{why} ({numbers})"}
