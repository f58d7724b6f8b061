"""RulesLLM as an `LLM` provider: protocol, validation, usage, errors, the sample sessions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ctxpipe.core.errors import LLMError
from ctxpipe.core.llm_schemas import PROMPT_SCHEMAS, ExtractionOutput, MergeOutput, SessionDigest
from ctxpipe.core.models import ArchiveSummary
from ctxpipe.core.session import SessionInput, message_vars
from ctxpipe.providers.base import LLM, LLMUsage
from ctxpipe.providers.rules import HANDLERS, RulesLLM

PROCEDURE = {"cases", "patterns", "skills"}  # the procedure extractor's categories
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def session(path: Path) -> SessionInput:
    return SessionInput.model_validate(json.loads(path.read_text()))


def extraction_vars(s: SessionInput) -> dict[str, Any]:
    own = [m for m in s.messages if not m.injected]
    return {
        "messages": message_vars(own),
        "summary": "",
        "key_topics": [],
        "tools": [t.model_dump() for t in s.used_tools],
        "user_id": s.user_id,
        "agent_id": s.agent_id,
        "session_time": max(m.created_at for m in own if m.created_at).isoformat(),
    }


def test_implements_the_protocol_and_every_prompt() -> None:
    llm = RulesLLM()
    assert isinstance(llm, LLM)
    assert llm.name == "rules"
    assert set(HANDLERS) == set(PROMPT_SCHEMAS)


def test_usage_is_counted() -> None:
    usage = LLMUsage()
    msgs = [{"id": "m1", "role": "user", "content": "I'm a nurse and I live in Cork."}]
    RulesLLM().complete_json_sync(
        "extraction.profile", {"messages": msgs}, ExtractionOutput, usage=usage
    )
    assert usage.calls == 1
    assert usage.prompt_tokens >= 9 and usage.completion_tokens > 0


def test_async_path_returns_the_schema_instance() -> None:
    msgs = [{"id": "x", "role": "user", "content": "My name is Ana. I work at Initech."}]
    out = asyncio.run(
        RulesLLM().complete_json("extraction.profile", {"messages": msgs}, ExtractionOutput)
    )
    assert isinstance(out, ExtractionOutput)
    assert "- The user works at Initech. [x]" in out.memories[0].overview


def test_unknown_prompt_and_schema_mismatch_raise_llm_error() -> None:
    with pytest.raises(LLMError, match="no rule set"):
        RulesLLM().complete_json_sync("nope.prompt", {}, ExtractionOutput)

    class Strict(BaseModel):
        something_else: int

    with pytest.raises(LLMError, match="does not match Strict"):
        RulesLLM().complete_json_sync("policy.dedup_decision", {"category": "events"}, Strict)


def test_injected_messages_are_never_extracted() -> None:
    msgs = [
        {
            "id": "r",
            "role": "system",
            "content": "Recalled: I'm a pilot at Skyways.",
            "injected": True,
        },
        {
            "id": "u",
            "role": "user",
            "content": "I'm a pilot at Skyways. I love jazz.",
            "injected": True,
        },
        {"id": "v", "role": "user", "content": "I'm a florist in Galway."},
    ]
    llm = RulesLLM()
    prof = llm.complete_json_sync("extraction.profile", {"messages": msgs}, ExtractionOutput)
    assert prof.memories[0].overview == "- The user is a florist in Galway. [v]"
    prefs = llm.complete_json_sync("extraction.preferences", {"messages": msgs}, ExtractionOutput)
    assert prefs.memories == []


def test_deterministic() -> None:
    s = session(EXAMPLES / "bob_2026-03-20_school_trip.json")
    llm = RulesLLM()
    for prompt in ("extraction.entity_event", "extraction.procedure"):
        a = llm.complete_json_sync(prompt, extraction_vars(s), ExtractionOutput)
        b = llm.complete_json_sync(prompt, extraction_vars(s), ExtractionOutput)
        assert a == b


def test_examples_are_valid_sessions_with_memories() -> None:
    paths = sorted(EXAMPLES.glob("*.json"))
    assert len(paths) >= 3
    users = set()
    llm = RulesLLM()
    for path in paths:
        s = session(path)
        users.add(s.user_id)
        v = extraction_vars(s)
        found = []
        extractors = [p for p in PROMPT_SCHEMAS if p.startswith("extraction.")]
        for prompt in [p for p in extractors if p != "extraction.session"]:
            out = llm.complete_json_sync(prompt, v, ExtractionOutput)
            ids = {m.id for m in s.messages}
            for mem in out.memories:
                assert set(mem.source_refs) <= ids and mem.source_refs
            found += out.memories
        assert {m.category for m in found} >= {"profile", "entities", "events"}
        summary = llm.complete_json_sync(
            "compression.archive_summary",
            {"messages": v["messages"], "tools": v["tools"], "max_tokens": 200},
            ArchiveSummary,
        )
        assert summary.summary and summary.key_topics
        # the session's one call: the same summary and every extractor's memories
        digest = llm.complete_json_sync(
            "extraction.session",
            {**v, "max_tokens": 200, "extractors": ["profile", "preferences", "entity_event"]},
            SessionDigest,
        )
        assert digest.summary == summary.summary and digest.key_topics == summary.key_topics
        assert digest.memories == [m for m in found if m.category not in PROCEDURE]
    assert len(users) >= 2


def test_examples_job_change_merges_with_a_conflict() -> None:
    llm = RulesLLM()
    first, second = (
        llm.complete_json_sync(
            "extraction.profile", extraction_vars(session(EXAMPLES / name)), ExtractionOutput
        ).memories[0]
        for name in ("alice_2026-03-16_airflow.json", "alice_2026-04-20_new_job.json")
    )
    out = llm.complete_json_sync(
        "policy.merge_bundle",
        {
            "category": "profile",
            "existing_abstract": first.abstract,
            "existing_overview": first.overview,
            "existing_content": first.content,
            "new_abstract": second.abstract,
            "new_overview": second.overview,
            "new_content": second.content,
        },
        MergeOutput,
    )
    # the job is single-valued: the new employer closes the old one, the rest accumulates
    assert out.conflicts == [
        "The user is Alice, a data engineer at Acme Analytics. -> "
        "The user joined Globex as a staff engineer"
    ]
    assert "Globex" in out.abstract and "Acme" not in out.abstract
    assert "(superseded: The user joined Globex as a staff engineer)" in out.overview
    # "I still live in Lisbon" says nothing new: the same fact from both sessions, once
    assert [ln for ln in out.overview.splitlines() if "Lisbon" in ln] == [
        "- The user lives in Lisbon [m1]"
    ]
    assert out.overview.count("lives in Lisbon") == 1
