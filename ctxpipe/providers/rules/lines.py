"""Memory lines: the bullet format the extractors emit and the merge reads back.

A line is ``- <statement> [m3, m7] — "evidence" (valid from <date> until <date>)
(superseded: <newer statement>)``; the evidence, the dates and the superseded part are there
only when known (the annotation: `ctxpipe.core.validity`). A line without a bullet is free
text, kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ctxpipe.core.text import normalize_space
from ctxpipe.core.validity import Validity, split_annotation

MEMORY_FIELDS = ("category", "routing_key", "abstract", "overview", "content", "confidence")
_LINE_RE = re.compile(
    r"^\s*[-*•]\s+(?P<body>.*?)(?:\s*\[(?P<refs>[^\[\]]*)\])?"
    r"(?:\s+—\s+\"(?P<evidence>.*)\")?\s*$"
)


@dataclass
class Line:
    text: str
    refs: list[str] = field(default_factory=list)
    evidence: str = ""
    validity: Validity = Validity()
    bullet: bool = True

    @property
    def active(self) -> bool:
        return not self.validity.closed

    def close(self, by: Line) -> None:
        """This line is replaced by `by`: valid until `by` became true, superseded by it."""
        v = self.validity
        self.validity = replace(
            v, valid_to=v.valid_to or by.validity.valid_from, superseded=by.text
        )

    def add_refs(self, refs: list[str]) -> None:
        self.refs.extend(r for r in refs if r not in self.refs)

    def render(self) -> str:
        refs = f" [{', '.join(self.refs)}]" if self.refs else ""
        evidence = f' — "{self.evidence}"' if self.evidence else ""
        return (
            f"- {self.text}{refs}{evidence}{self.validity.render()}" if self.bullet else self.text
        )


def parse_lines(text: str) -> list[Line]:
    """The lines of a markdown block (non-bullet lines are kept as free text)."""
    out: list[Line] = []
    for raw in filter(str.strip, (text or "").splitlines()):
        head, validity = split_annotation(raw)
        m = _LINE_RE.match(head)
        if not m:
            out.append(Line(text=raw.rstrip(), bullet=False))
            continue
        refs = [r.strip() for r in (m.group("refs") or "").split(",") if r.strip()]
        body = normalize_space(m.group("body"))
        out.append(Line(body, refs, m.group("evidence") or "", validity))
    return out


def render_lines(lines: list[Line]) -> str:
    return "\n".join(ln.render() for ln in lines)


def synthesize(subject: str, lines: list[Line], max_chars: int = 240) -> str:
    """One-line synthesis of the valid lines: '<subject>: line; line (+N more)'."""
    active = [ln.text.rstrip(".") for ln in lines if ln.active and ln.text]
    body: list[str] = []
    for text in active:
        if body and len("; ".join([*body, text])) > max_chars:
            break
        body.append(text)
    more = len(active) - len(body)
    line = "; ".join(body) + (f" (+{more} more)" if more > 0 else "") or "no details"
    return f"{subject}: {line}" if subject else line[:1].upper() + line[1:]


def memory(*fields: str | float, refs: Iterable[str], **extra: str) -> dict[str, Any]:
    """One extracted memory as the extraction schema reads it: the `MEMORY_FIELDS` in order,
    then its refs (each once, in order) and any `extra` fields."""
    found = dict(zip(MEMORY_FIELDS, fields, strict=True))
    return {**found, "source_refs": list(dict.fromkeys(refs)), **extra}
