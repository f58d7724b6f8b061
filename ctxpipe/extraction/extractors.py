"""The four extractors: profile, preferences, entities and events, procedures.

Each one has a gate (`skip_reason`, `ctxpipe.extraction.gates`): when the session's messages
cannot hold anything for its categories, it reports SKIPPED with the reason and makes no LLM
call; it still runs as its own task.
"""

from __future__ import annotations

from ctxpipe.core.enums import MemoryCategory as C
from ctxpipe.core.session import Message, ToolUse
from ctxpipe.extraction import gates
from ctxpipe.extraction.base import CandidateExtractor


class ProfileExtractor(CandidateExtractor):
    name = "profile"
    prompt_id = "extraction.profile"
    categories = frozenset({C.PROFILE})

    def skip_reason(self, messages: list[Message], tools: list[ToolUse]) -> str | None:
        return gates.profile_gate(messages, tools)


class PreferenceExtractor(CandidateExtractor):
    name = "preferences"
    prompt_id = "extraction.preferences"
    categories = frozenset({C.PREFERENCES})

    def skip_reason(self, messages: list[Message], tools: list[ToolUse]) -> str | None:
        return gates.preferences_gate(messages, tools)


class EntityEventExtractor(CandidateExtractor):
    name = "entity_event"
    prompt_id = "extraction.entity_event"
    categories = frozenset({C.ENTITIES, C.EVENTS})

    def skip_reason(self, messages: list[Message], tools: list[ToolUse]) -> str | None:
        return gates.entity_event_gate(messages, tools)


class ProcedureExtractor(CandidateExtractor):
    name = "procedure"
    prompt_id = "extraction.procedure"
    categories = frozenset({C.CASES, C.PATTERNS, C.SKILLS})

    def skip_reason(self, messages: list[Message], tools: list[ToolUse]) -> str | None:
        return gates.procedure_gate(messages, tools)


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
