"""RulesLLM: the deterministic, offline LLM provider (the default). It never renders or reads
a prompt: it dispatches on `prompt_id`, derives its answer from the structured prompt
`variables` with the modules of this package, and validates it against the requested schema
like a real provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ctxpipe.core.errors import LLMError
from ctxpipe.core.session import RequestContext
from ctxpipe.providers.base import LLMUsage
from ctxpipe.providers.rules import extract
from ctxpipe.providers.rules.dedup import dedup_decision
from ctxpipe.providers.rules.intent import intent_analysis
from ctxpipe.providers.rules.merge import merge_bundle
from ctxpipe.providers.rules.summarize import archive_summary

T = TypeVar("T", bound=BaseModel)
Handler = Callable[[dict[str, Any]], dict[str, Any]]

EXTRACTION: dict[str, Handler] = {
    "profile": extract.extract_profile,
    "preferences": extract.extract_preferences,
    "entity_event": extract.extract_entity_event,
    "procedure": extract.extract_procedure,
}


def session_digest(variables: dict[str, Any]) -> dict[str, Any]:
    """`extraction.session`: the summary, then each extractor asked for, on the same input."""
    out = archive_summary(variables)
    asked = (EXTRACTION[name](variables)["memories"] for name in variables["extractors"])
    out["memories"] = [m for memories in asked for m in memories]
    return out


HANDLERS: dict[str, Handler] = {
    "compression.archive_summary": archive_summary,
    "extraction.session": session_digest,
    **{f"extraction.{name}": handler for name, handler in EXTRACTION.items()},
    "policy.merge_bundle": merge_bundle,
    "policy.dedup_decision": dedup_decision,
    "retrieval.intent_analysis": intent_analysis,
}


def _words(value: Any) -> int:
    """Whitespace-separated words of a JSON-ish value (strings inside it, recursively)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict | list | tuple | set):
        return sum(map(_words, value.values() if isinstance(value, dict) else value))
    return int(value is not None)


class RulesLLM:
    """Deterministic rule-based implementation of the `LLM` protocol.

    Token accounting is approximate: `prompt_tokens` counts the words of the input variables
    and `completion_tokens` the words of the output; there is no tokenizer behind them.
    """

    name = "rules"

    def __init__(self, handlers: dict[str, Handler] | None = None) -> None:
        self._handlers = dict(HANDLERS if handlers is None else handlers)

    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        return self.complete_json_sync(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T:
        handler = self._handlers.get(prompt_id)
        if handler is None:
            raise LLMError(
                f"rules provider has no rule set for prompt {prompt_id!r}; "
                f"known prompts: {', '.join(sorted(self._handlers))}"
            )
        try:
            raw = handler(dict(variables or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise LLMError(f"rules provider failed on {prompt_id!r}: {exc}") from exc
        try:
            result = schema.model_validate(raw)
        except ValidationError as exc:
            raise LLMError(
                f"rules output for {prompt_id!r} does not match {schema.__name__}: {exc}"
            ) from exc
        if usage is not None:
            usage.calls += 1
            usage.prompt_tokens += _words(variables)
            usage.completion_tokens += _words(json.loads(result.model_dump_json()))
        return result
