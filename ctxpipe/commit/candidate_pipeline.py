"""Phase 2b: CandidatePipeline.normalize — filter, group, truncate and cap candidates."""

from __future__ import annotations

from ctxpipe.core.config import PipelineConfig
from ctxpipe.core.models import (
    CandidateMemory,
    ExtractionResult,
    SkippedCandidate,
    ToolSkillCandidate,
)
from ctxpipe.core.text import similarity
from ctxpipe.core.uri import slugify

Candidate = CandidateMemory | ToolSkillCandidate

# a candidate this close to a memory recalled into the session restates it (core.text)
RESTATES = 0.9


class CandidatePipeline:
    def __init__(self, config: PipelineConfig) -> None:
        self._config = config

    @staticmethod
    def flatten(results: list[ExtractionResult]) -> list[Candidate]:
        return [c for r in results for c in r.candidates]

    def normalize(
        self,
        candidates: list[Candidate],
        *,
        injected_ids: set[str] | None = None,
        recalled_texts: list[str] | None = None,
        max_candidates: int | None = None,
    ) -> tuple[list[Candidate], list[SkippedCandidate]]:
        """Returns (kept, skipped-with-reason). Never raises for one bad candidate."""
        cfg = self._config
        injected_ids = injected_ids or set()
        recalled = [t for t in (recalled_texts or []) if t.strip()]
        skipped: list[SkippedCandidate] = []

        def skip(c: Candidate, reason: str) -> None:
            skipped.append(
                SkippedCandidate(
                    routing_key=c.routing_key, category=c.category.value, reason=reason
                )
            )

        groups: dict[tuple[str, str], Candidate] = {}
        for c in candidates:
            refs = [r for r in c.source_refs if r not in injected_ids]
            if not refs:
                skip(c, "no source message ids outside injected memory context")
                continue
            if c.confidence < cfg.min_confidence:
                skip(c, f"confidence {c.confidence:.2f} < min {cfg.min_confidence:.2f}")
                continue
            if any(similarity(c.abstract, t) >= RESTATES for t in recalled):
                skip(c, "restates a memory recalled into this session (used_contexts)")
                continue
            c = c.model_copy(update={"source_refs": refs})
            if len(c.content) > cfg.max_content_length:
                c = c.model_copy(update={"content": c.content[: cfg.max_content_length]})
            key = (c.category.value, slugify(c.routing_key))
            held = groups.get(key)
            if held is None:
                groups[key] = c
                continue
            best, other = (c, held) if c.confidence > held.confidence else (held, c)
            merged_refs = list(dict.fromkeys([*best.source_refs, *other.source_refs]))
            groups[key] = best.model_copy(update={"source_refs": merged_refs})
            skip(other, f"merged into the more confident candidate for {key[1]!r}")
        kept = sorted(
            groups.values(), key=lambda c: (-c.confidence, c.category.value, c.routing_key)
        )
        cap = cfg.max_candidates_per_commit if max_candidates is None else max_candidates
        for c in kept[cap:]:
            skip(c, f"over the cap of {cap} candidates per commit")
        return kept[:cap], skipped
