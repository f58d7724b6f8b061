"""The answer to a question an archive hit asks: the turn after it, said by another speaker.

A query shares its words with the question it asks about ("How long have you had such a great
support system?"), while the answer is the turn after it ("I've known these friends for four
years"), which shares none; `build_context` shows such a hit with its answer
(`ContextConfig.replies`). The answer is the next line of the hit's chunk, or — when the
question ends its chunk — the first line of the next one, read from the archive's whole
transcript.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from ctxpipe.core.errors import CtxError
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.context.dated_lines import with_dates
from ctxpipe.retrieval.models import FindHit
from ctxpipe.retrieval.units.lexical import Unit, split_units

log = logging.getLogger(__name__)

View = list[Unit]


_MARKERS_RE = re.compile(r"^\[([^\]]+)\]", re.MULTILINE)  # "[D6:1] user (Ann) on ...: "


def _chunk_refs(h: FindHit, text: str | None = None) -> list[str]:
    """The refs of every turn of an archive hit's chunk (or of `text`, its archive's whole
    transcript): each line's marker id in the session of the turns the hit cites
    (`session:msgid`)."""
    sessions = {r.split(":", 1)[0] for r in h.source_refs if ":" in r}
    if len(sessions) != 1:
        return list(h.source_refs)
    (session,) = sessions
    text = h.chunk_text if text is None else text
    ids = (i.strip() for m in _MARKERS_RE.finditer(text) for i in m.group(1).split(","))
    return [f"{session}:{i}" for i in ids if i]


def archive_transcript(fs: ContextFS, h: FindHit) -> Callable[[], str]:
    """The whole transcript of an archive hit's node (its content), read when asked."""

    def read() -> str:
        try:
            raw = fs.read_file(h.uri, "content.md")
        except (CtxError, OSError, ValueError) as exc:
            log.debug("cannot read the transcript of %s: %s", h.uri, exc)
            return ""
        return raw.decode("utf-8", errors="replace") if raw else ""

    return read


def with_replies(h: FindHit, view: View, transcript: Callable[[], str] | None = None) -> View:
    """An archive hit that ends with a question, followed by its answer: the next line of its
    chunk after each turn it matched, when another speaker says it and the hit does not
    already hold it. A query shares its words with the question it asks about ("How long have
    you had such a great support system?"); the answer is the turn after it ("I've known
    these friends for four years"), which repeats none of them. A reply cites its own turn
    only. Hits that ask nothing are left as they are: their next turn is not an answer to
    them, and would only take a place another hit needs.

    A question that ends its chunk is answered at the start of the next one: its answer is
    then read from `transcript` (the archive's whole text), when given."""
    if h.context_type != "session" or not h.chunk_text or not h.source_refs:
        return view
    if not h.text.rstrip().endswith("?"):
        return view
    lines, matched = archive_lines(h, _chunk_refs(h))
    if transcript is not None and matched and matched[-1] == len(lines) - 1:
        text = transcript()
        if text.strip():
            lines, matched = archive_lines(h, _chunk_refs(h, text), text)
    held = set(h.source_refs)
    replies = [
        _opening(nxt)
        for u, nxt in ((lines[i], lines[i + 1]) for i in matched if i + 1 < len(lines))
        if nxt.refs and not set(nxt.refs) & held and nxt.speaker and nxt.speaker != u.speaker
    ]
    return [*view, *with_dates(replies)] if replies else view


def archive_lines(
    h: FindHit, refs: Sequence[str], text: str | None = None
) -> tuple[View, list[int]]:
    """The lines of an archive hit's chunk (or of `text`), each citing its turn among `refs`,
    and the indexes of those the hit matched."""
    lines = split_units(h.chunk_text if text is None else text, refs, derived=False)
    held = set(h.source_refs)
    return lines, [i for i, u in enumerate(lines) if set(u.refs) & held]


REPLY_WORDS = 60  # a reply is shown up to this many words (whole sentences where it can be)


def _opening(u: Unit) -> Unit:
    """The first sentences of a reply, up to REPLY_WORDS words (the first sentence cut there
    when it alone is longer): an assistant's long answer does not take a hit's place."""
    if len(u.body.split()) <= REPLY_WORDS:
        return u
    kept: list[str] = []
    n = 0
    for s in u.sentences():
        size = len(s.body.split())
        if kept and n + size > REPLY_WORDS:
            break
        kept.append(s.body if size <= REPLY_WORDS else " ".join(s.body.split()[:REPLY_WORDS]))
        n += size
    return replace(u, text=u.prefix + " ".join(kept))


__all__ = ["REPLY_WORDS", "View", "archive_lines", "archive_transcript", "with_replies"]
