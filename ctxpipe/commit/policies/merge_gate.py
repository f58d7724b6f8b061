"""The merge's gate: a merge that cannot change the node, decided without the LLM.

A candidate whose every overview and content line (dated as the merge would date it) is
already a line of the node, citing only messages the node already cites, with no metadata the
node lacks, adds nothing: `policy.merge_bundle` is not called and the plan is a SKIP, the
same plan the policy makes after the call when the merge came back unchanged. This is what a
session committed again under a new commit id (a producer's retry, a re-import) looks like.
"""

from __future__ import annotations

from typing import Any

from ctxpipe.core.models import ContextNode


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip()}


def adds_nothing(
    patch: dict[str, str],
    existing: ContextNode,
    refs: list[str],
    metadata: dict[str, Any] | None = None,
) -> bool:
    """`patch`: the candidate's overview and content, dated against the node's texts."""
    if not set(refs) <= set(existing.source_refs):
        return False
    if any(existing.metadata.get(k) != v for k, v in (metadata or {}).items()):
        return False
    for level, old in (("overview", existing.overview), ("content", existing.content)):
        new = _lines(patch.get(level, ""))
        if not new or not new <= _lines(old):
            return False
    return True
