"""The four extractors: profile, preferences, entities and events, procedures."""

from __future__ import annotations

from ctxpipe.core.enums import MemoryCategory as C
from ctxpipe.extraction.base import CandidateExtractor


class ProfileExtractor(CandidateExtractor):
    name = "profile"
    prompt_id = "extraction.profile"
    categories = frozenset({C.PROFILE})


class PreferenceExtractor(CandidateExtractor):
    name = "preferences"
    prompt_id = "extraction.preferences"
    categories = frozenset({C.PREFERENCES})


class EntityEventExtractor(CandidateExtractor):
    name = "entity_event"
    prompt_id = "extraction.entity_event"
    categories = frozenset({C.ENTITIES, C.EVENTS})


class ProcedureExtractor(CandidateExtractor):
    name = "procedure"
    prompt_id = "extraction.procedure"
    categories = frozenset({C.CASES, C.PATTERNS, C.SKILLS})


EXTRACTORS: dict[str, CandidateExtractor] = {
    e.name: e
    for e in (
        ProfileExtractor(),
        PreferenceExtractor(),
        EntityEventExtractor(),
        ProcedureExtractor(),
    )
}
EXTRACTOR_NAMES: tuple[str, ...] = tuple(EXTRACTORS)
