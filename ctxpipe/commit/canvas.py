"""The shape of a commit's task canvas: which extractors get a task of their own.

A chord of one task per extractor pays for itself only where the extractors really run in
parallel: each waits on a slow LLM. An extractor with nothing to ask the LLM (its categories
filtered out, no message of the user's own) runs inside the plan step instead; a commit with
fewer than two such extractors, a dry run, or one on the in-process rules LLM (milliseconds of
CPU per extractor) gets no chord at all: the whole commit — archive, extractors (concurrently),
plan, write, register — is one task (`steps.run`).
"""

from __future__ import annotations

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.config import Settings
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES, EXTRACTORS


def fast_llm(settings: Settings) -> bool:
    """The in-process rules provider without simulated latency."""
    return settings.llm_provider == "rules" and settings.llm_simulated_latency_s <= 0


def extractor_tasks(req: CommitRequest | None, settings: Settings) -> list[str]:
    """The extractors that get a task of their own (a chord before the plan); empty: none,
    the commit runs as one task (`steps.run`). Without the request (a re-drive), every
    extractor counts as having work."""
    mode = settings.commit.extract_fanout
    if mode == "inline" or (mode == "auto" and fast_llm(settings)):
        return []
    if req is None:
        return list(EXTRACTOR_NAMES)
    if req.options.dry_run or settings.commit.dry_run:
        return []
    if all(m.injected for m in req.messages):
        return []  # every extractor reports "empty" without asking the LLM
    wanted = req.options.categories_filter
    names = [n for n in EXTRACTOR_NAMES if EXTRACTORS[n].wanted(wanted)]
    return names if len(names) >= 2 else []


__all__ = ["extractor_tasks", "fast_llm"]
