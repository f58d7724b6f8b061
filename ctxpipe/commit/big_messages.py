"""Big messages are kept: a session is never refused for one long message.

Two bounds of `LimitsConfig` (`CTXPIPE_LIMITS__*`), each a cut in time linear in the text:

- `max_message_keep_chars` (2,000,000): what is kept. A longer message enters the pipeline
  (and the ledger, and the archive) as a bounded excerpt: its first that many characters, then
  an explicit marker naming its original length; `Message.original_chars` records it.
- `max_message_chars` (100,000): what the pipeline reads. The archive summary and the four
  extractors read a longer message's first that many characters (`reading_window`); the
  archive still keeps the whole (kept) message.

Either cut leaves a warning in the commit's result (`warnings`) and in the log.
"""

from __future__ import annotations

import logging

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import LimitsConfig, Message, check_limits

log = logging.getLogger(__name__)


def excerpt_marker(kept: int, original: int) -> str:
    """The line that ends a kept excerpt: it says that the message was cut, and how long it was."""
    return f"\n[ctxpipe: message cut: the first {kept:,} of its {original:,} characters are kept]"


def keep_bounded(messages: list[Message], keep_chars: int) -> list[Message]:
    """`messages` with each one longer than `keep_chars` replaced by its bounded excerpt (the
    others are the same objects); a message already cut is left as it is."""
    out: list[Message] = []
    for m in messages:
        size = len(m.content)
        if size <= keep_chars or m.original_chars is not None:
            out.append(m)
            continue
        log.warning(
            "message %r has %d characters: kept as an excerpt of its first %d "
            "(CTXPIPE_LIMITS__MAX_MESSAGE_KEEP_CHARS)",
            m.id,
            size,
            keep_chars,
        )
        text = m.content[:keep_chars] + excerpt_marker(keep_chars, size)
        out.append(m.model_copy(update={"content": text, "original_chars": size}))
    return out


def admit(req: CommitRequest, limits: LimitsConfig) -> CommitRequest:
    """The request as it is recorded: long messages cut to their kept excerpt, then the size
    limits checked (`InputLimitError` before anything is recorded)."""
    bounded = keep_bounded(req.messages, limits.max_message_keep_chars)
    if any(a is not b for a, b in zip(bounded, req.messages, strict=True)):
        req = req.model_copy(update={"messages": bounded})
    check_limits(req.messages, req.used_contexts, req.used_tools, limits)
    return req


def reading_window(messages: list[Message], window_chars: int) -> list[Message]:
    """The messages as the pipeline reads them: each one's first `window_chars` characters."""
    return [
        m
        if len(m.content) <= window_chars
        else m.model_copy(update={"content": m.content[:window_chars]})
        for m in messages
    ]


def warnings(messages: list[Message], limits: LimitsConfig) -> list[str]:
    """One line per message that was cut to an excerpt or read in part."""
    out: list[str] = []
    window = limits.max_message_chars
    for m in messages:
        if m.original_chars is not None:
            out.append(
                f"message {m.id!r} had {m.original_chars:,} characters: the archive keeps an "
                f"excerpt of its first {limits.max_message_keep_chars:,} "
                f"(CTXPIPE_LIMITS__MAX_MESSAGE_KEEP_CHARS); extraction read its first "
                f"{min(window, len(m.content)):,} (CTXPIPE_LIMITS__MAX_MESSAGE_CHARS)"
            )
        elif len(m.content) > window:
            out.append(
                f"message {m.id!r} has {len(m.content):,} characters: extraction read its "
                f"first {window:,} (CTXPIPE_LIMITS__MAX_MESSAGE_CHARS)"
            )
    return out


__all__ = ["admit", "excerpt_marker", "keep_bounded", "reading_window", "warnings"]
