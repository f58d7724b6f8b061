"""Typed views of the prompt variables (messages, tools, times) the rules provider works from."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from functools import cached_property
from typing import Any

from ctxpipe.providers.rules.text import split_sentences


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dict(dump())
    if isinstance(item, str):
        return {"content": item}
    return {}


def parse_time(value: Any) -> datetime | None:
    """ISO string / datetime / date → datetime (None when absent or unparsable)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    text = str(value).strip()
    for iso in (text, text[:10]):
        try:
            return datetime.fromisoformat(iso)
        except ValueError:
            pass
    return None


@dataclass
class Msg:
    id: str
    role: str
    content: str
    index: int
    name: str | None = None
    created_at: datetime | None = None

    @cached_property
    def sentences(self) -> list[str]:
        return split_sentences(self.content)

    @property
    def is_user(self) -> bool:
        return self.role == "user"

    @property
    def is_assistant(self) -> bool:
        return self.role == "assistant"


def load_messages(raw: Any) -> list[Msg]:
    """Messages from the `messages` variable, minus injected ones (recalled memory)."""
    out: list[Msg] = []
    for i, item in enumerate(raw or []):
        d = _as_dict(item)
        if d.get("injected"):
            continue
        content = str(d.get("content") or "")
        if not content.strip():
            continue
        out.append(
            Msg(
                id=str(d.get("id") or f"#{i}"),
                role=str(d.get("role") or "user"),
                content=content,
                index=len(out),
                name=d.get("name"),
                created_at=parse_time(d.get("created_at")),
            )
        )
    return out


@dataclass
class Tool:
    name: str
    kind: str = "tool"
    success: bool = True
    duration_ms: int = 0
    tokens: int = 0
    input: str = ""
    output: str = ""
    error: str = ""
    message_id: str | None = None


def load_tools(raw: Any) -> list[Tool]:
    out: list[Tool] = []
    for item in raw or []:
        d = _as_dict(item)
        name = str(d.get("name") or "").strip()
        if not name:
            continue
        out.append(
            Tool(
                name=name,
                kind=str(d.get("kind") or "tool"),
                success=bool(d.get("success", True)),
                duration_ms=int(d.get("duration_ms") or 0),
                tokens=int(d.get("tokens") or 0),
                input=str(d.get("input") or ""),
                output=str(d.get("output") or ""),
                error=str(d.get("error") or ""),
                message_id=d.get("message_id"),
            )
        )
    return out
