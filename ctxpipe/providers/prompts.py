"""Prompt registry: YAML templates (jinja2) of the top-level `prompts/` directory (shipped in
the package: `ctxpipe.resources`).

Each `prompts/**/*.yaml` file holds one prompt::

    id: extraction.profile              # required, unique across the directory
    description: ...                    # optional
    output_schema: ExtractionOutput     # optional; a PROMPT_SCHEMAS id or model class name,
                                        # omitted -> looked up by `id` in PROMPT_SCHEMAS
    template: |                         # required, jinja2 (StrictUndefined)
      ...

Rendering uses `jinja2.StrictUndefined`: a variable the template needs but the caller did not
pass is a `PromptError` naming the variable and the prompt.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml
from jinja2 import meta
from pydantic import BaseModel

from ctxpipe.core.errors import PromptError
from ctxpipe.core.llm_schemas import PROMPT_SCHEMAS
from ctxpipe.resources import resource_dir

DEFAULT_PROMPTS_DIR = resource_dir("prompts")

_ALLOWED_KEYS = frozenset({"id", "template", "description", "output_schema"})


def _to_json(value: Any, indent: int | None = None) -> str:
    """`{{ x | to_json }}`: JSON without HTML escaping (the built-in `tojson` escapes `<>&'`)."""
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["to_json"] = _to_json
    return env


def _schema_by_name(name: str) -> type[BaseModel] | None:
    if name in PROMPT_SCHEMAS:
        return PROMPT_SCHEMAS[name]
    for model in PROMPT_SCHEMAS.values():
        if model.__name__ == name:
            return model
    return None


@dataclass(frozen=True)
class PromptTemplate:
    """One loaded prompt."""

    id: str
    template: str
    source: Path
    description: str = ""
    output_schema: type[BaseModel] | None = None
    variables: frozenset[str] = frozenset()
    compiled: jinja2.Template | None = field(default=None, repr=False, compare=False)


class PromptRegistry:
    """All prompts of one directory, by id."""

    def __init__(self, prompts: Mapping[str, PromptTemplate], directory: Path) -> None:
        self._prompts = dict(prompts)
        self.directory = directory

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, directory: Path | None = None) -> PromptRegistry:
        """Load every `*.yaml` under `directory` (default: the repo's `prompts/`)."""
        root = Path(directory) if directory is not None else DEFAULT_PROMPTS_DIR
        if not root.is_dir():
            raise PromptError(f"prompt directory {root} does not exist")
        env = _make_env()
        prompts: dict[str, PromptTemplate] = {}
        for path in sorted(root.rglob("*.yaml")):
            prompt = cls._load_file(env, path, root)
            if prompt.id in prompts:
                raise PromptError(
                    f"duplicate prompt id {prompt.id!r} in {path.relative_to(root)} "
                    f"(already defined in {prompts[prompt.id].source.relative_to(root)})"
                )
            prompts[prompt.id] = prompt
        return cls(prompts, root)

    @staticmethod
    def _load_file(env: jinja2.Environment, path: Path, root: Path) -> PromptTemplate:
        rel = path.relative_to(root)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise PromptError(f"malformed YAML in prompt file {rel}: {exc}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise PromptError(f"cannot read prompt file {rel}: {exc}") from exc
        if not isinstance(data, dict):
            raise PromptError(f"prompt file {rel} must contain a mapping with 'id' and 'template'")
        unknown = sorted(set(map(str, data)) - _ALLOWED_KEYS)
        if unknown:
            raise PromptError(
                f"prompt file {rel} has unknown keys {unknown}; allowed: {sorted(_ALLOWED_KEYS)}"
            )
        pid, template = data.get("id"), data.get("template")
        if not isinstance(pid, str) or not pid.strip():
            raise PromptError(f"prompt file {rel}: 'id' must be a non-empty string")
        if not isinstance(template, str) or not template.strip():
            raise PromptError(f"prompt file {rel} ({pid}): 'template' must be a non-empty string")
        description = data.get("description") or ""
        if not isinstance(description, str):
            raise PromptError(f"prompt file {rel} ({pid}): 'description' must be a string")

        schema_name = data.get("output_schema")
        schema: type[BaseModel] | None
        if schema_name is None:
            schema = PROMPT_SCHEMAS.get(pid)
        else:
            schema = _schema_by_name(str(schema_name))
            if schema is None:
                raise PromptError(
                    f"prompt file {rel} ({pid}): unknown output_schema {schema_name!r}; "
                    f"known: {sorted(PROMPT_SCHEMAS)}"
                )
        try:
            ast = env.parse(template)
            compiled = env.from_string(template)
        except jinja2.TemplateSyntaxError as exc:
            raise PromptError(
                f"prompt file {rel} ({pid}): template syntax error at line {exc.lineno}: "
                f"{exc.message}"
            ) from exc
        return PromptTemplate(
            id=pid,
            template=template,
            source=path,
            description=description.strip(),
            output_schema=schema,
            variables=frozenset(meta.find_undeclared_variables(ast)),
            compiled=compiled,
        )

    # ------------------------------------------------------------------ queries
    def ids(self) -> list[str]:
        return sorted(self._prompts)

    def __contains__(self, prompt_id: object) -> bool:
        return prompt_id in self._prompts

    def __len__(self) -> int:
        return len(self._prompts)

    def get(self, prompt_id: str) -> PromptTemplate:
        try:
            return self._prompts[prompt_id]
        except KeyError:
            raise PromptError(
                f"unknown prompt id {prompt_id!r} (loaded from {self.directory}: {self.ids()})"
            ) from None

    def variables(self, prompt_id: str) -> frozenset[str]:
        """Top-level variables the template references (all of them are required)."""
        return self.get(prompt_id).variables

    def schema(self, prompt_id: str) -> type[BaseModel]:
        prompt = self.get(prompt_id)
        if prompt.output_schema is None:
            raise PromptError(
                f"prompt {prompt_id!r} has no output schema: set 'output_schema' in "
                f"{prompt.source.name} or register the id in PROMPT_SCHEMAS"
            )
        return prompt.output_schema

    def render(self, prompt_id: str, variables: Mapping[str, Any]) -> str:
        prompt = self.get(prompt_id)
        missing = sorted(prompt.variables - set(variables))
        if missing:
            raise PromptError(
                f"prompt {prompt_id!r} ({prompt.source.name}) is missing variable(s): "
                + ", ".join(missing)
            )
        assert prompt.compiled is not None
        try:
            return prompt.compiled.render(**variables).strip() + "\n"
        except jinja2.UndefinedError as exc:
            raise PromptError(
                f"prompt {prompt_id!r} ({prompt.source.name}): undefined value while rendering: "
                f"{exc.message}"
            ) from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise PromptError(
                f"prompt {prompt_id!r} ({prompt.source.name}): cannot render with the given "
                f"variables: {exc}"
            ) from exc


@functools.lru_cache(maxsize=1)
def default_registry() -> PromptRegistry:
    """The registry of the repo's `prompts/` directory, loaded once per process."""
    return PromptRegistry.load()
