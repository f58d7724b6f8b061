"""mkdocs hook: the pages generated at build time, never written by hand.

- `configuration.md`: every `Settings` field (and each field of its nested configs) with its
  environment variable, type, default and description (the field's docstring).
- `http-api.md` and `openapi.json`: the routes and models of the OpenAPI document the API
  serves (`ctxpipe.api.app.openapi_document`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

GENERATED = "<!-- generated at build time by docs/hooks/reference.py: do not edit -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(annotation: Any) -> str:
    name = getattr(annotation, "__name__", None)
    text = name if name and not getattr(annotation, "__args__", None) else repr(annotation)
    return re.sub(r"\b(typing|pathlib|pydantic\.types|collections\.abc)\.", "", text)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        return "(secret)" if value.get_secret_value() else "(empty)"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list):
        return f"`{json.dumps(value)}`"
    return f"`{value}`" if str(value) != "" else "(empty)"


def _row(env: str, field: FieldInfo) -> str:
    return (
        f"| `{env.upper()}` | `{_cell(_type(field.annotation))}` | {_cell(_default(field))} | "
        f"{_cell(field.description or '')} |"
    )


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def configuration_markdown() -> str:
    """The configuration page, from `ctxpipe.core.config.Settings`."""
    from ctxpipe.core.config import Settings

    head = ["| Environment variable | Type | Default | Meaning |", "|---|---|---|---|"]
    top: list[str] = []
    nested: list[str] = []

    def section(path: list[str], model: type[BaseModel]) -> None:
        """One table per nested config; a config inside one (`retrieval.find`) gets its own."""
        doc = " ".join((model.__doc__ or "").split())
        rows, inner = [], []
        for sub, f in model.model_fields.items():
            if _is_model(f.annotation):
                inner.append((sub, f.annotation))
            else:
                rows.append(_row("CTXPIPE_" + "__".join([*path, sub]), f))
        if rows:
            nested.extend(["", f"### `{'.'.join(path)}`: {model.__name__}", "", doc, "", *head])
            nested.extend(rows)
        for sub, ann in inner:
            section([*path, sub], ann)

    for name, field in Settings.model_fields.items():
        if _is_model(field.annotation):
            section([name], field.annotation)
        else:
            top.append(_row(f"CTXPIPE_{name}", field))
    lines = [
        GENERATED,
        "# Configuration",
        "",
        "Every setting is an environment variable `CTXPIPE_<NAME>`; the settings of a phase are",
        "nested with `__` (`CTXPIPE_DEDUP__SIMILARITY_THRESHOLD`). This page is generated from",
        "`ctxpipe.core.config.Settings` (each field's docstring) when the site is built.",
        "",
        "## Settings",
        "",
        *head,
        *top,
        "",
        "## Nested settings",
        *nested,
        "",
    ]
    return "\n".join(lines)


def _ref(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if "anyOf" in schema:
        return " \\| ".join(_ref(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_ref(schema.get('items', {}))}"
    if schema.get("type") == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"map of {_ref(extra) if isinstance(extra, dict) else 'any'}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return f"`{schema.get('type', 'any')}`"


def http_api_markdown(doc: dict[str, Any]) -> str:
    """The HTTP API page, from the OpenAPI document."""
    lines = [
        GENERATED,
        "# HTTP API reference",
        "",
        f"{doc['info']['title']} API version {doc['info']['version']}. Generated from the OpenAPI",
        "document the API serves at `/openapi.json` (interactive at `/docs`); the same document:",
        "[openapi.json](openapi.json). Authentication, tenancy and errors: [HTTP API](api.md).",
        "",
        "| Method | Path | Summary |",
        "|---|---|---|",
    ]
    ops = [
        (path, method, op)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]
    for path, method, op in ops:
        anchor = op["operationId"].lower()
        lines.append(
            f"| {method.upper()} | [`{path}`](#{anchor}) | {_cell(op.get('summary', ''))} |"
        )
    for path, method, op in ops:
        lines += ["", f"## `{method.upper()} {path}` {{#{op['operationId'].lower()}}}", ""]
        if op.get("description"):
            lines += [op["description"].strip(), ""]
        params = op.get("parameters", [])
        if params:
            lines += ["| Parameter | In | Type | Required | Description |", "|---|---|---|---|---|"]
            for p in params:
                lines.append(
                    f"| `{p['name']}` | {p['in']} | {_ref(p.get('schema', {}))} | "
                    f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                )
            lines.append("")
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body:
            lines += [f"Request body: {_ref(body['schema'])}", ""]
        lines += ["| Status | Answer |", "|---|---|"]
        for status, resp in op.get("responses", {}).items():
            content = resp.get("content", {}).get("application/json", {})
            shape = _ref(content["schema"]) if "schema" in content else ""
            lines.append(f"| {status} | {_cell(resp.get('description', ''))} {shape} |")
    lines += ["", "## Models"]
    for name, schema in sorted(doc["components"]["schemas"].items()):
        lines += ["", f"### `{name}` {{#{name.lower()}}}", ""]
        if schema.get("description"):
            lines += [_cell(schema["description"]), ""]
        if "enum" in schema:
            lines += ["One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
            continue
        required = set(schema.get("required", []))
        props = schema.get("properties", {})
        if props:
            lines += ["| Field | Type | Required | Description |", "|---|---|---|---|"]
            for field, sub in props.items():
                lines.append(
                    f"| `{field}` | {_ref(sub)} | {'yes' if field in required else 'no'} | "
                    f"{_cell(sub.get('description', ''))} |"
                )
    return "\n".join(lines) + "\n"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    from ctxpipe.api.app import openapi_document

    doc = openapi_document()
    pages = {
        "configuration.md": configuration_markdown(),
        "http-api.md": http_api_markdown(doc),
        "openapi.json": json.dumps(doc, indent=2) + "\n",
    }
    for path, content in pages.items():
        files.append(File.generated(config, path, content=content))
    return files
