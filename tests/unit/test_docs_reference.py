"""The generated pages of the docs site (docs/hooks/reference.py): the configuration page names
every setting with its description, the HTTP API page every operation and model of the
OpenAPI document the API serves."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel

from ctxpipe.api.app import openapi_document
from ctxpipe.core.config import Settings

HOOK = Path(__file__).resolve().parents[2] / "docs" / "hooks" / "reference.py"


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_fields() -> dict[str, str]:
    """Environment variable -> description of every setting, nested ones included (a config
    inside a config, `retrieval.find`, too: `CTXPIPE_RETRIEVAL__FIND__TOP_K`)."""
    out: dict[str, str] = {}

    def walk(prefix: str, model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(f"{prefix}{name}__", ann)
            else:
                out[f"{prefix}{name}".upper()] = field.description or ""

    walk("CTXPIPE_", Settings)
    return out


def test_every_setting_is_documented_in_its_model() -> None:
    fields = settings_fields()
    assert len(fields) > 70
    assert sorted(env for env, text in fields.items() if not text.strip()) == []


def test_the_configuration_page_lists_every_setting() -> None:
    page = hook().configuration_markdown()
    rows = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `CTXPIPE_")}
    assert rows == set(settings_fields())
    assert "| `CTXPIPE_FLOWER_PASSWORD` | `SecretStr` | (secret) |" in page  # never the value
    assert "| `CTXPIPE_DEDUP__SIMILARITY_THRESHOLD` | `float` | `0.85` |" in page
    assert "| `CTXPIPE_RETRIEVAL__FIND__TOP_K` | `int` | `10` |" in page
    assert "### `retrieval.find`: FindConfig" in page


def test_the_http_api_page_covers_the_openapi_document() -> None:
    doc = openapi_document()
    page = hook().http_api_markdown(doc)
    for path, item in doc["paths"].items():
        for method in item:
            assert f"## `{method.upper()} {path}`" in page
    for name in doc["components"]["schemas"]:
        assert f"### `{name}` {{#{name.lower()}}}" in page
    assert "[`FindResult`](#findresult)" in page


def test_the_concepts_page_states_each_memory_category_as_the_code_does() -> None:
    from ctxpipe.commit.policy_router import CATEGORY_POLICY_MAP
    from ctxpipe.core.enums import AGENT_CATEGORIES, USER_CATEGORIES, MemoryCategory
    from ctxpipe.core.validity import TEMPORAL_CATEGORIES

    page = (HOOK.parents[1] / "concepts.md").read_text(encoding="utf-8")
    rows = {
        cells[0].strip("`"): cells
        for line in page.splitlines()
        if line.startswith("| `")
        and (cells := [c.strip() for c in line.strip().strip("|").split("|")])
        and len(cells) == 5
    }
    assert set(rows) == {c.value for c in MemoryCategory}
    for category in MemoryCategory:
        _, owner, node, policy, dated = rows[category.value]
        assert owner == ("user" if category in USER_CATEGORIES else "agent")
        assert category in USER_CATEGORIES | AGENT_CATEGORIES
        assert f"/memories/{category.value}" in node
        assert policy.startswith(f"`{CATEGORY_POLICY_MAP[category]}`")
        assert dated == ("yes" if category.value in TEMPORAL_CATEGORIES else "no")
