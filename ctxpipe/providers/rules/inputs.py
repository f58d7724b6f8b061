"""Typed views of the prompt variables (messages, tool calls) the rules provider works from."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import cached_property
from typing import Any

from pydantic import BaseModel

from ctxpipe.core.session import ToolUse
from ctxpipe.core.validity import to_date
from ctxpipe.providers.rules.text import split_sentences


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, BaseModel):
        return item.model_dump()
    if isinstance(item, str):
        return {"content": item}
    return item if isinstance(item, dict) else {}


@dataclass
class Msg:
    id: str
    role: str
    content: str
    index: int
    name: str | None = None
    day: date | None = None  # the day it was sent

    @cached_property
    def sentences(self) -> list[str]:
        return split_sentences(self.content)

    @property
    def is_user(self) -> bool:
        return self.role == "user"


def load_messages(raw: Any) -> list[Msg]:
    """Messages from the `messages` variable, minus injected ones (recalled memory)."""
    out: list[Msg] = []
    for i, d in enumerate(map(_as_dict, raw or [])):
        content = str(d.get("content") or "")
        if d.get("injected") or not content.strip():
            continue
        msg_id, role = str(d.get("id") or f"#{i}"), str(d.get("role") or "user")
        out.append(
            Msg(msg_id, role, content, len(out), d.get("name"), to_date(d.get("created_at")))
        )
    return out


def load_tools(raw: Any) -> list[ToolUse]:
    """The tool calls of the `tools` variable (`ToolUse` records), unnamed ones left out."""
    return [ToolUse.model_validate(d) for d in map(_as_dict, raw or []) if d.get("name")]
