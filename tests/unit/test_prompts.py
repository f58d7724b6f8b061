"""PromptRegistry and the shipped prompt templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxpipe.core.errors import PromptError
from ctxpipe.core.llm_schemas import PROMPT_SCHEMAS, ExtractionOutput, MergeOutput
from ctxpipe.providers.prompts import DEFAULT_PROMPTS_DIR, PromptRegistry, default_registry

MESSAGES = [
    {
        "id": "m-101",
        "role": "user",
        "name": None,
        "content": "I'm Dana, a data engineer.",
        "created_at": "2025-03-01T10:00:00Z",
    },
    {"id": "m-102", "role": "assistant", "name": None, "content": "Hi Dana!", "created_at": None},
    {"id": "m-103", "role": "tool", "name": "sql", "content": "3 rows", "created_at": None},
]
TOOLS = [
    {
        "name": "sql",
        "kind": "tool",
        "success": False,
        "duration_ms": 40,
        "tokens": 12,
        "input": "SELECT 1",
        "output": None,
        "error": "permission denied",
    },
]
EXTRACTION_VARS = {
    "messages": MESSAGES,
    "summary": "Dana introduced herself.",
    "key_topics": ["introductions", "sql"],
    "tools": TOOLS,
    "user_id": "dana",
    "agent_id": "helper",
    "session_time": "2025-03-01T10:00:00Z",
}
# The contract with the pipeline and the offline rules provider: the variables of each prompt.
CONTRACT: dict[str, dict[str, Any]] = {
    "compression.archive_summary": {
        "messages": MESSAGES,
        "tools": TOOLS,
        "session_id": "s-9",
        "max_tokens": 300,
    },
    "extraction.profile": EXTRACTION_VARS,
    "extraction.preferences": EXTRACTION_VARS,
    "extraction.entity_event": EXTRACTION_VARS,
    "extraction.procedure": EXTRACTION_VARS,
    "policy.merge_bundle": {
        "category": "preferences",
        "existing_abstract": "Prefers tabs.",
        "existing_overview": "- tabs",
        "existing_content": "The user prefers tabs.",
        "new_abstract": "Prefers 4-space indents.",
        "new_overview": "- spaces",
        "new_content": "The user now prefers four spaces.",
    },
    "policy.dedup_decision": {
        "category": "entities",
        "candidate_abstract": "Project Atlas is a data lake.",
        "candidate_content": "Atlas stores events.",
        "existing_abstract": "Atlas: data lake.",
        "existing_content": "",
        "similarity": 0.9134,
    },
    "retrieval.intent_analysis": {
        "query": "what did we decide about it?",
        "recent_messages": MESSAGES,
        "max_queries": 3,
    },
}


@pytest.fixture(scope="module")
def registry() -> PromptRegistry:
    return PromptRegistry.load()


def write(dir_: Path, name: str, text: str) -> None:
    path = dir_ / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_every_schema_has_a_template(registry: PromptRegistry) -> None:
    assert set(PROMPT_SCHEMAS) <= set(registry.ids())
    for pid, model in PROMPT_SCHEMAS.items():
        assert registry.schema(pid) is model
        assert registry.get(pid).description


def test_default_dir_is_repo_prompts() -> None:
    assert DEFAULT_PROMPTS_DIR.name == "prompts"
    assert (DEFAULT_PROMPTS_DIR.parent / "ctxpipe").is_dir()
    assert (DEFAULT_PROMPTS_DIR / "compression" / "archive_summary.yaml").is_file()
    assert default_registry() is default_registry()


@pytest.mark.parametrize("pid", sorted(CONTRACT))
def test_template_variables_match_contract(registry: PromptRegistry, pid: str) -> None:
    assert registry.variables(pid) == set(CONTRACT[pid])
    text = registry.render(pid, CONTRACT[pid])
    assert "{{" not in text and "{%" not in text
    assert "JSON" in text
    for field in registry.schema(pid).model_fields:
        if field in ("tool_name", "skill_name", "best_for", "common_failures") and (
            pid != "extraction.procedure"
        ):
            continue
        assert f'"{field}"' in text, f"{pid} does not describe output field {field!r}"


@pytest.mark.parametrize("pid", [p for p in CONTRACT if "messages" in CONTRACT[p]])
def test_messages_rendered_with_ids(registry: PromptRegistry, pid: str) -> None:
    text = registry.render(pid, CONTRACT[pid])
    assert "[m-101] user: I'm Dana, a data engineer." in text
    assert "[m-103] tool: 3 rows" in text
    if registry.schema(pid) is ExtractionOutput:
        assert "source_refs" in text


def test_render_details(registry: PromptRegistry) -> None:
    text = registry.render("compression.archive_summary", CONTRACT["compression.archive_summary"])
    assert "sql (tool): failed, 40 ms, 12 tokens" in text
    assert "error: permission denied" in text
    assert "under 300 tokens" in text
    dedup = registry.render("policy.dedup_decision", CONTRACT["policy.dedup_decision"])
    assert "0.913" in dedup
    intent = registry.render("retrieval.intent_analysis", CONTRACT["retrieval.intent_analysis"])
    assert "up to 3" in intent and "what did we decide about it?" in intent
    # optional sections disappear when empty, the session time too
    bare = registry.render(
        "extraction.entity_event", {**EXTRACTION_VARS, "tools": [], "session_time": None}
    )
    assert "Tools used" not in bare and "session time is unknown" in bare
    # non-ASCII and braces in content pass through untouched
    odd = [{"id": "x1", "role": "user", "content": "数据 {{ not a var }} <b>&</b>"}]
    out = registry.render(
        "retrieval.intent_analysis",
        {**CONTRACT["retrieval.intent_analysis"], "recent_messages": odd},
    )
    assert "[x1] user: 数据 {{ not a var }} <b>&</b>" in out


def test_missing_variable_names_variable_and_prompt(registry: PromptRegistry) -> None:
    variables = dict(CONTRACT["policy.merge_bundle"])
    del variables["new_overview"]
    with pytest.raises(PromptError, match=r"'policy.merge_bundle'.*new_overview"):
        registry.render("policy.merge_bundle", variables)


def test_missing_nested_field_is_prompt_error(registry: PromptRegistry) -> None:
    broken = [{"id": "m1", "role": "user"}]  # no content
    with pytest.raises(PromptError, match=r"extraction.profile.*content"):
        registry.render("extraction.profile", {**EXTRACTION_VARS, "messages": broken})


def test_unknown_prompt_id(registry: PromptRegistry) -> None:
    with pytest.raises(PromptError, match="unknown prompt id 'nope'"):
        registry.get("nope")
    with pytest.raises(PromptError):
        registry.render("nope", {})


def test_load_custom_dir(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a/one.yaml",
        "id: custom.one\ntemplate: 'Hello {{ name }}!'\noutput_schema: MergeOutput\n",
    )
    write(tmp_path, "two.yaml", "id: policy.merge_bundle\ntemplate: x {{ y }}\n")
    write(tmp_path, "three.yaml", "id: custom.free\ntemplate: plain\n")
    write(tmp_path, "ignored.txt", "not yaml")
    reg = PromptRegistry.load(tmp_path)
    assert reg.ids() == ["custom.free", "custom.one", "policy.merge_bundle"]
    assert reg.render("custom.one", {"name": "Ann"}) == "Hello Ann!\n"
    assert reg.schema("custom.one") is MergeOutput
    assert reg.schema("policy.merge_bundle") is MergeOutput  # looked up by id
    with pytest.raises(PromptError, match="no output schema"):
        reg.schema("custom.free")


@pytest.mark.parametrize(
    ("files", "match"),
    [
        (
            {"a.yaml": "id: x\ntemplate: a\n", "b/c.yaml": "id: x\ntemplate: b\n"},
            r"duplicate prompt id 'x' in b/c.yaml \(already defined in a.yaml\)",
        ),
        ({"bad.yaml": "id: x\ntemplate: [unclosed\n"}, r"malformed YAML in prompt file bad.yaml"),
        ({"list.yaml": "- id: x\n"}, r"list.yaml must contain a mapping"),
        ({"noid.yaml": "template: hi\n"}, r"noid.yaml: 'id' must be a non-empty string"),
        ({"notpl.yaml": "id: x\n"}, r"notpl.yaml \(x\): 'template' must be"),
        ({"extra.yaml": "id: x\ntemplate: t\ntemplpate: t\n"}, r"extra.yaml has unknown keys"),
        (
            {"schema.yaml": "id: x\ntemplate: t\noutput_schema: Nope\n"},
            r"schema.yaml \(x\): unknown output_schema 'Nope'",
        ),
        (
            {"syntax.yaml": "id: x\ntemplate: |\n  ok\n  {% for %}\n"},
            r"syntax.yaml \(x\): template syntax error at line 2",
        ),
    ],
)
def test_load_errors_name_the_file(tmp_path: Path, files: dict[str, str], match: str) -> None:
    for name, text in files.items():
        write(tmp_path, name, text)
    with pytest.raises(PromptError, match=match):
        PromptRegistry.load(tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="does not exist"):
        PromptRegistry.load(tmp_path / "nowhere")


def test_example_outputs_in_templates_are_close_to_schema(registry: PromptRegistry) -> None:
    """The example in merge_bundle is valid JSON for its schema (keeps docs and schema in sync)."""
    text = registry.render("policy.merge_bundle", CONTRACT["policy.merge_bundle"])
    start = text.index("{\n", text.index("## Output"))
    example = json.loads(text[start : text.rindex("}") + 1])
    MergeOutput.model_validate(example)
