"""A model's reply → an object of the schema: strict JSON first, then a local repair, then
the schema (pydantic). What cannot be repaired into a valid object is refused (`OutputRefused`),
and the caller asks the model again.

The repair (the `json-repair` library) fixes the syntax local models get wrong: code fences,
prose around the object, trailing commas, single quotes, Python `True`/`None`, comments,
missing closing brackets. Around it, three rules keep it from inventing an answer:

- the reply must hold a `{...}` object (a markdown list or plain prose is refused);
- a reply cut short is repaired only when the cut falls after a complete value (only closing
  brackets are missing), never inside a string or a bare word;
- the repaired object must set at least one field of the schema (or be written `{}`) and
  validate; when the reply holds several objects that do, they must be the same object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

__all__ = ["OutputRefused", "Parsed", "parse_reply", "validation_summary"]

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# the end of a cut-short object that lost only its closing brackets: a complete value, then
# perhaps the comma before the next member
_EMPTY_RE = re.compile(r"\{\s*\}\Z")
_VALUE_END_RE = re.compile(r"""(?:["'\]}\d]|\b(?:true|false|null|True|False|None))\s*,?\s*\Z""")


class OutputRefused(ValueError):
    """The reply holds no object of the schema, even repaired: worth asking the model again."""


@dataclass(frozen=True)
class Parsed(Generic[T]):
    value: T
    repaired: bool  # False: the reply was the object's JSON as it stands


def parse_reply(content: str, schema: type[T]) -> Parsed[T]:
    """`content` as an instance of `schema`, repaired where its JSON is not strict."""
    text = content.strip()
    try:
        strict = json.loads(text)
    except ValueError:
        strict = None
    if isinstance(strict, dict):  # well-formed: validate as it stands, nothing to repair
        try:
            return Parsed(schema.model_validate_json(text), repaired=False)
        except ValidationError as exc:
            raise OutputRefused(
                f"does not match schema {schema.__name__}: {validation_summary(exc)}"
            ) from exc
    return Parsed(_repaired(_THINK_RE.sub("", text), schema), repaired=True)


def validation_summary(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
        parts.append(f"{loc}: {err.get('msg', '')}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _repaired(text: str, schema: type[T]) -> T:
    complete, tail, cut_in_string = _top_level_objects(text)
    candidates = list(complete)
    if tail is not None and not cut_in_string and _VALUE_END_RE.search(tail):
        candidates.append(tail)
    if not candidates:
        if tail is not None:
            raise OutputRefused("not valid JSON: the reply was cut inside a value")
        raise OutputRefused("not valid JSON: no JSON object in the reply")
    fields = _field_names(schema)
    found: list[T] = []
    errors: list[str] = []
    for span in candidates:
        try:
            obj = json_repair.loads(span)
        except (ValueError, RecursionError):  # the library's own limits: not repairable
            continue
        if not isinstance(obj, dict) or not (fields & obj.keys() or _EMPTY_RE.match(span)):
            continue
        try:
            value = schema.model_validate_json(json.dumps(obj))
        except (ValidationError, ValueError) as exc:
            errors.append(validation_summary(exc) if isinstance(exc, ValidationError) else str(exc))
            continue
        if value not in found:
            found.append(value)
    if len(found) == 1:
        return found[0]
    if found:
        raise OutputRefused(f"{len(found)} different {schema.__name__} objects in the reply")
    if errors:
        raise OutputRefused(f"does not match schema {schema.__name__}: {errors[0]}")
    raise OutputRefused(f"not valid JSON: no object with a field of {schema.__name__}")


def _field_names(schema: type[BaseModel]) -> set[str]:
    names = set(schema.model_fields)
    names.update(f.alias for f in schema.model_fields.values() if f.alias)
    return names


def _top_level_objects(text: str) -> tuple[list[str], str | None, bool]:
    """The complete top-level `{...}` of `text` (brackets inside strings and comments do not
    count), the object its end leaves open (None if none), and whether the cut falls inside a
    string. Between objects (prose) nothing is read but `{`."""
    complete: list[str] = []
    depth, start, i, n = 0, 0, 0, len(text)
    quote = ""  # the quote of the string being read
    prev = ""  # the last character outside strings, spaces aside
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote, prev = "", ch
            i += 1
            continue
        if depth == 0:
            if ch == "{":
                depth, start, prev = 1, i, ch
            i += 1
            continue
        if ch == '"' or (ch == "'" and prev in "{[,:"):
            quote = ch
        elif ch == "#" or text.startswith("//", i):
            i = _after(text, "\n", i)
            continue
        elif text.startswith("/*", i):
            i = _after(text, "*/", i + 2)
            continue
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                complete.append(text[start : i + 1])
        if not ch.isspace():
            prev = ch
        i += 1
    tail = text[start:] if depth > 0 else None
    return complete, tail, bool(quote)


def _after(text: str, end: str, i: int) -> int:
    found = text.find(end, i)
    return len(text) if found == -1 else found + len(end)
