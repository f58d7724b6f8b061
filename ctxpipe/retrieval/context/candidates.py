"""Where `build_context` gets its pieces, as candidates with progressively longer views.

A candidate has views, cheapest first: view 0 is what `find` returned (a memory's L0 line, or
the lines of an archive that matched); view 1 is the node's L1 (a memory's overview) or, for a
session archive, the whole matched chunk; view 2 is the node's L2 content. Views past 0 are
read from the FS only when the builder has budget left to expand the item. A view is a list of
units (lines), each with the message ids it cites, so a truncated view cites only what it keeps.

The lines of a profile or preference memory are kept only while their fact is valid — now, or
as of the request's date (`ctxpipe.core.validity`); as of a date before the session that last
wrote such a memory, its L0 line (what holds now) gives way to the lines that held then.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date

from ctxpipe.core.errors import CtxError
from ctxpipe.core.models import ContextNode
from ctxpipe.core.session import Message
from ctxpipe.core.text import containment, token_set
from ctxpipe.core.validity import (
    TEMPORAL_CATEGORIES,
    as_of_view,
    line_holds,
    split_annotation,
    synthesis_holds,
)
from ctxpipe.fs import ContextFS
from ctxpipe.retrieval.context.budget_allocator import ContextPriority
from ctxpipe.retrieval.context.dated_lines import with_dates
from ctxpipe.retrieval.context.replies import (
    View,
    archive_lines,
    archive_transcript,
    with_replies,
)
from ctxpipe.retrieval.models import FindHit
from ctxpipe.retrieval.search.hierarchical_retriever import hit_key
from ctxpipe.retrieval.units.lexical import Unit, split_units
from ctxpipe.storage.db import Database
from ctxpipe.storage.queries import Queries

log = logging.getLogger(__name__)


@dataclass
class Candidate:
    key: str
    section: str
    priority: int
    score: float = 0.0
    order: int = 0
    uri: str = ""
    views: list[View] = field(default_factory=list)
    loader: Callable[[], list[View]] | None = None
    loaded: bool = False

    def view(self, i: int) -> View | None:
        if i >= len(self.views) and not self.loaded and self.loader is not None:
            self.loaded = True
            try:
                self.views.extend(v for v in self.loader() if v)
            except (CtxError, OSError, ValueError) as exc:
                log.debug("cannot expand %s: %s", self.uri, exc)
        return self.views[i] if i < len(self.views) else None


def render(units: Sequence[Unit]) -> str:
    return "\n".join(u.text for u in units if u.text)


def cited(units: Sequence[Unit]) -> list[str]:
    out: list[str] = []
    for u in units:
        for r in u.refs:
            if r not in out:
                out.append(r)
    return out


# ------------------------------------------------------------------ conversation
def conversation_candidates(
    messages: Sequence[Message],
    query: str,
    session_id: str,
    *,
    max_turns: int,
    recent_turns: int,
) -> list[Candidate]:
    """The session's recent messages (the most recent turns rank higher) and the query."""
    usable = [m for m in messages if not m.injected and m.role in ("user", "assistant")]
    usable = usable[-max_turns * 2 :] if max_turns else []
    out: list[Candidate] = []
    n = len(usable)
    for i, m in enumerate(usable):
        recent = i >= n - recent_turns * 2
        who = m.name or m.role
        out.append(
            Candidate(
                key=f"msg:{m.id}",
                section="conversation",
                priority=int(
                    ContextPriority.RECENT_TURNS if recent else ContextPriority.OLDER_TURNS
                ),
                order=i,
                views=[[Unit(f"{who}: {m.content.strip()}", [f"{session_id}:{m.id}"])]],
            )
        )
    last_user = next((m for m in reversed(usable) if m.role == "user"), None)
    if query.strip() and (last_user is None or last_user.content.strip() != query.strip()):
        out.append(
            Candidate(
                key="query",
                section="conversation",
                priority=int(ContextPriority.USER_QUERY),
                order=n,
                views=[[Unit(f"user: {query.strip()}")]],
            )
        )
    return out


# ------------------------------------------------------------------ preferences
def preference_candidates(
    db: Database,
    schema: str,
    account_id: str,
    user_space: str,
    limit: int,
    fs: ContextFS | None = None,
    as_of: date | None = None,
) -> list[Candidate]:
    """The user's profile and preference memories, newest first (query independent); as of a
    date, what they said then."""
    with db.connection() as conn:
        rows = conn.execute(
            Queries(schema)["retrieval_profile_nodes"],
            {
                "account": account_id,
                "space": user_space,
                "categories": ["profile", "preferences"],
                "limit": limit,
            },
        ).fetchall()
    out: list[Candidate] = []
    for i, (uri, _category, abstract, refs, _version) in enumerate(rows):
        line = (abstract or "").strip().splitlines()
        if not line:
            continue
        refs = [str(r) for r in refs or []]
        node = _read(fs, uri) if fs is not None else None
        # the line cites what it shows, not every message of the memory
        first = [Unit(line[0], shown_refs(line[0], node.overview, refs) if node else refs)]
        if as_of is not None and fs is not None:
            if node is None:
                continue  # what held then cannot be told
            then = _views_then(node, as_of)
            if then is not None:
                if not then:
                    continue  # nothing of it was known yet
                first = then
        out.append(
            Candidate(
                key=f"{uri}#0.0",
                section="user_prefs",
                priority=int(ContextPriority.PREFERENCES),
                score=1.0 / (1 + i),
                order=i,
                uri=uri,
                views=[first],
                loader=_memory_loader(fs, uri, as_of) if fs is not None else None,
            )
        )
    return out


def _read(fs: ContextFS, uri: str) -> ContextNode | None:
    try:
        return fs.read_node(uri)
    except (CtxError, OSError, ValueError) as exc:
        log.debug("cannot read %s: %s", uri, exc)
        return None


SHOWN_SHARE = 0.8  # a line said in other words is shown when this share of its words is


def shown_refs(text: str, overview: str, refs: Sequence[str]) -> list[str]:
    """The refs of the overview's lines that `text` (a node's one-line synthesis) shows: a
    line cites a message only if it carries that message's content. The synthesis joins the
    first lines of the overview ("Ann: line; line (+12 more)"); a line it shows is found
    whole in it, or by its content words when the synthesis says it in other words. Every
    ref when no overview line cites its own."""
    lines = split_units(overview, list(refs), derived=False)
    if not any(u.refs for u in lines):
        return list(refs)  # lines that cite nothing of their own: nothing to narrow by
    shown = " ".join(text.lower().split())
    words = token_set(text)
    out: list[str] = []
    for u in lines:
        line = split_annotation(u.body)[0]
        body = " ".join(line.lower().split()).rstrip(".")
        held = token_set(line)
        if not u.refs or not body:
            continue
        if body in shown or (held and containment(held, words) >= SHOWN_SHARE):
            out.extend(r for r in u.refs if r not in out)
    return out


def _views_then(node: ContextNode, as_of: date) -> View | None:
    """None when the node's L0 line held on `as_of`; else the L1 lines that held then."""
    if synthesis_holds(node.metadata.get("observed_at"), as_of):
        return None
    return valid_units(split_units(node.overview, list(node.source_refs), derived=True), as_of)


def valid_units(units: Sequence[Unit], as_of: date | None) -> View:
    """The lines of a profile or preference memory whose fact holds now or on `as_of`, each
    as it read then."""
    return [replace(u, text=as_of_view(u.text, as_of)) for u in units if line_holds(u.text, as_of)]


# ------------------------------------------------------------------ retrieved hits
def hit_candidates(
    hits: Sequence[FindHit],
    section: str,
    priority: int,
    fs: ContextFS | None,
    start: int = 0,
    as_of: date | None = None,
    *,
    replies: bool = False,
) -> list[Candidate]:
    """A candidate per hit; with `replies`, the first view of an archive hit that ends with a
    question also holds its answer (`with_replies`; read from the archive in `fs` when the
    question ends its chunk)."""
    out: list[Candidate] = []
    for i, h in enumerate(hits):
        text = h.text or h.abstract
        if not text:
            continue
        loader: Callable[[], list[View]] | None = None
        if h.context_type == "session":
            loader = _session_loader(fs, h)
        elif fs is not None:
            loader = _memory_loader(fs, h.uri, as_of)
        units = _hit_units(h, text)
        if replies:
            units = with_replies(h, units, archive_transcript(fs, h) if fs is not None else None)
        out.append(
            Candidate(
                key=hit_key(h),
                section=section,
                priority=priority,
                score=h.score,
                order=start + i,
                uri=h.uri,
                views=[units],
                loader=loader,
            )
        )
    return out


def superseded(h: FindHit, as_of: date | None = None) -> bool:
    """A profile or preference line that no longer holds (now, or on `as_of`): it is shown
    with its dates, after the values that hold."""
    if h.category not in TEMPORAL_CATEGORIES:
        return False
    return any(not line_holds(ln, as_of) for ln in (h.text or h.abstract).splitlines() if ln)


_POSSESSIVE_RE = re.compile(r"['’]s?$")  # "Melanie's", "James'": the name itself


def named_speaker(query: str, hits: Sequence[FindHit]) -> str:
    """The one participant of the retrieved turns the query names ("What instruments does
    Melanie play?"), lower-cased; "" when it names none of them, or several. A question
    about a person is answered by what that person said: on LoCoMo's tuning conversations 97 %
    of the evidence turns of such questions are the named person's own, while a third of the
    turns `find` ranks in its top 10 for them are said by someone else."""
    asked = {_POSSESSIVE_RE.sub("", w.lower()) for w in re.findall(r"[\w'’-]+", query)}
    names = {h.speaker.lower() for h in hits if h.context_type == "session" and h.speaker}
    named = [n for n in names if set(n.split()) <= asked]
    return named[0] if len(named) == 1 else ""


def speaks(cand: Candidate, speaker: str) -> bool:
    """The candidate is not a turn of someone else: a memory, a turn `speaker` said, or one
    that `speaker` answers (its reply)."""
    units = cand.views[0] if cand.views else []
    said = {u.speaker.lower() for u in units if u.speaker}
    return not said or speaker in said


_SPEAKER_RE = re.compile(r"^[^:\n]{1,80}?: ")  # "Ann (8 May 2023): " heads a turn's line


def _hit_units(h: FindHit, text: str) -> View:
    """The lines find returned for a hit; a turn's line keeps its speaker header as a prefix
    (a line cut to fit is judged by the words after it) and has its relative dates resolved."""
    refs = list(h.source_refs)
    if h.context_type != "session":
        return [Unit(text, refs)]
    out: View = []
    for ln in (ln.strip() for ln in text.splitlines()):
        if ln:
            m = _SPEAKER_RE.match(ln)
            out.append(Unit(ln, refs, prefix=m.group(0) if m else "", speaker=h.speaker))
    return with_dates(out)


def _memory_loader(
    fs: ContextFS | None, uri: str, as_of: date | None = None
) -> Callable[[], list[View]]:
    def load() -> list[View]:
        if fs is None:
            return []
        node = fs.read_node(uri)
        refs = list(node.source_refs)
        head = [
            Unit(u.text, shown_refs(u.text, node.overview, refs))
            for u in split_units(node.abstract, refs, derived=True)[:1]
        ]
        temporal = node.category in TEMPORAL_CATEGORIES
        if temporal and not synthesis_holds(node.metadata.get("observed_at"), as_of):
            head = []

        def lines(text: str) -> View:
            units = split_units(text, refs, derived=True)
            return valid_units(units, as_of) if temporal else units

        views: list[View] = []
        if node.overview.strip():
            views.append(head + lines(node.overview))
        if node.content.strip():
            views.append(head + lines(node.content))
        return views

    return load


def _session_loader(fs: ContextFS | None, hit: FindHit) -> Callable[[], list[View]]:
    """Longer views of an archive hit, each holding the lines it matched: the exchange around
    them (the line before and the line after: a question and its answer), then the chunk."""

    def load() -> list[View]:
        refs = list(hit.source_refs)
        node = None
        if fs is not None:
            node = fs.read_node(hit.uri)
            refs = list(node.source_refs)
        views: list[View] = []
        if hit.chunk_text:
            units, matched = archive_lines(hit, refs)
            lines = with_dates(units)
            if matched:
                views.append(lines[max(0, matched[0] - 1) : matched[-1] + 2])
            views.append(lines)
        if node is not None and node.content.strip():
            views.append(with_dates(split_units(node.content, refs, derived=False)))
        return views

    return load


__all__ = [
    "Candidate",
    "View",
    "cited",
    "conversation_candidates",
    "hit_candidates",
    "named_speaker",
    "preference_candidates",
    "render",
    "shown_refs",
    "speaks",
    "superseded",
    "valid_units",
]
