"""Delete a user (right to erasure): `ctxpipe users delete ACCOUNT USER`.

What goes:

- every node the user owns (``ctx://{account}/users/{user}/``, tombstones included);
- the sessions that belong to the user (their recorded owner, or the ledger's commits) with
  their archives, owner record and commit journal;
- in agents' memories, what was derived from those sessions: a node citing only the user's
  turns is removed; a node that also cites other users' turns loses the lines that cite the
  user's and those source refs, and its history (which holds the old text) is reset;
- relation edges to or from anything removed, in both directions;
- in PostgreSQL: the replica rows (nodes, chunks, unit vectors), edges, outbox events, the
  ledger rows and phase outputs of the user's commits, recall statistics, context snapshots,
  archive rows; rewritten agent nodes are re-indexed by an UPSERT_CONTEXT event.

Order makes it safe against commits in flight: the erasure mark (`fs.erasure_marks`) is written
first; every lock the eraser takes is one a commit's writes take too, and a commit accepted
before the mark that reaches a write afterwards finds the mark and writes nothing. Running it
again finds nothing more to remove. The mark is the audit record: a hash of the user, the time,
and counts — no personal content.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.errors import CtxError
from ctxpipe.core.models import OutboxEvent, utcnow
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs import ContextFS, FSRelationStore, OwnerLock
from ctxpipe.fs.atomic import atomic_write_file
from ctxpipe.fs.erasure_marks import ErasureMarks, user_hash
from ctxpipe.fs.history import HISTORY_FILE, HistoryEntry, NodeChange
from ctxpipe.fs.session_owner import SessionOwners, session_lock_key

_MARKER_RE = re.compile(r"\[([^\]]*)\]")


class Replica(Protocol):
    """The database side of an erasure (None: the FS only; repair removes the rest later)."""

    def ledger_sessions(self, account: str, user: str) -> list[str]: ...

    def erase(
        self, account: str, user: str, sessions: list[str], uris: list[str]
    ) -> dict[str, int]: ...

    def reindex(self, events: list[OutboxEvent]) -> None: ...


class ErasureReport(BaseModel):
    account: str
    user_hash: str
    erased_at: datetime
    dry_run: bool = False
    user_nodes: int = 0
    sessions: int = 0
    agent_nodes_removed: int = 0
    agent_nodes_rewritten: int = 0
    edges_removed: int = 0
    rows: dict[str, int] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class UserEraser:
    def __init__(
        self,
        fs: ContextFS,
        lock: OwnerLock,
        replica: Replica | None = None,
        clock: Callable[[], datetime] = utcnow,
        lock_timeout_s: float = 30.0,
    ) -> None:
        self.fs = fs
        self.lock = lock
        self.replica = replica
        self.clock = clock
        self.timeout = lock_timeout_s
        self.owners = SessionOwners(fs)
        self.relations = FSRelationStore(fs)

    # ------------------------------------------------------------------ what is the user's
    def sessions_of(self, account: str, user: str) -> list[str]:
        found: set[str] = set()
        base = self.fs.resolve_path(CtxURI.parse(f"ctx://{account}/sessions/"))
        if base.is_dir():  # every session dir, also one holding only its owner record
            for entry in base.iterdir():
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                owner = self.owners.owner(account, entry.name)
                if owner is not None and owner.user_id == user:
                    found.add(entry.name)
        if self.replica is not None:
            for sid in self.replica.ledger_sessions(account, user):
                owner = self.owners.owner(account, sid)
                if owner is None or owner.user_id == user:
                    found.add(sid)
        return sorted(found)

    def _agent_nodes(self, account: str) -> list[str]:
        base = CtxURI.parse(f"ctx://{account}/agents/")
        if not self.fs.exists(base):
            return []
        return [uri for uri, _ in self.fs.walk_nodes(base)]

    # ------------------------------------------------------------------ the erasure
    def erase(self, account: str, user: str, dry_run: bool = False) -> ErasureReport:
        now = self.clock()
        report = ErasureReport(
            account=account, user_hash=user_hash(account, user), erased_at=now, dry_run=dry_run
        )
        user_root = CtxURI.parse(f"ctx://{account}/users/{user}/")
        sessions = self.sessions_of(account, user)
        report.sessions = len(sessions)
        prefixes = tuple(f"{s}:" for s in sessions)
        if dry_run:
            if self.fs.exists(user_root):
                report.user_nodes = sum(1 for _ in self.fs.walk_nodes(user_root))
            for uri in self._agent_nodes(account):
                node = self.fs.read_node(uri, include_content=False)
                mine = [r for r in node.source_refs if r.startswith(prefixes)]
                if mine and len(mine) == len(node.source_refs):
                    report.agent_nodes_removed += 1
                elif mine:
                    report.agent_nodes_rewritten += 1
            return report
        marks = ErasureMarks(self.fs)
        marks.write(account, user, {"user_hash": report.user_hash, "erased_at": now})
        removed: list[str] = []
        # 1. the user's own space
        with self.lock.hold(f"{account}/users/{user}", self.timeout):
            if self.fs.resolve_path(user_root).is_dir():  # hidden files alone count too
                nodes = [uri for uri, _ in self.fs.walk_nodes(user_root)]
                report.user_nodes = len(nodes)
                removed += nodes
                self.fs.delete(user_root, recursive=True)
        # 2. the user's sessions
        for sid in sessions:
            with self.lock.hold(session_lock_key(account, sid), self.timeout):
                base = CtxURI.parse(f"ctx://{account}/sessions/{sid}/")
                if self.fs.resolve_path(base).is_dir():  # .owner.json, .commits/ included
                    removed += [uri for uri, _ in self.fs.walk_nodes(base)]
                    self.fs.delete(base, recursive=True)
        # 3. agents' memories derived from those sessions
        rewritten = self._scrub_agents(account, prefixes, removed, report)
        # 4. edges that point at anything removed
        report.edges_removed = self._drop_edges(account, set(removed))
        # 5. the replica and the ledger
        if self.replica is not None:
            try:
                report.rows = self.replica.erase(account, user, sessions, removed + rewritten)
                self.replica.reindex(
                    [
                        OutboxEvent(
                            event_id=OutboxEvent.make_id(
                                OutboxEventType.UPSERT_CONTEXT, uri, f"erased-{now.isoformat()}"
                            ),
                            event_type=OutboxEventType.UPSERT_CONTEXT,
                            uri=uri,
                            payload={"reason": "rewritten by an erasure"},
                        )
                        for uri in rewritten
                    ]
                )
            except Exception as exc:  # noqa: BLE001 - the FS is done; say what is left
                report.warnings.append(
                    f"database part failed ({' '.join(str(exc).split())[:200]}); run the "
                    "command again when PostgreSQL is reachable"
                )
        else:
            report.warnings.append("no database: only the FS was erased; run it again with one")
        marks.write(
            account,
            user,
            {
                "user_hash": report.user_hash,
                "erased_at": now,
                "counts": report.model_dump(
                    include={"user_nodes", "sessions", "agent_nodes_removed",
                             "agent_nodes_rewritten", "edges_removed", "rows"}
                ),
            },
        )  # fmt: skip
        return report

    def _scrub_agents(
        self, account: str, prefixes: tuple[str, ...], removed: list[str], report: ErasureReport
    ) -> list[str]:
        rewritten: list[str] = []
        if not prefixes:
            return rewritten
        for uri in self._agent_nodes(account):
            u = CtxURI.parse(uri)
            with self.lock.hold(f"{account}/agents/{u.segments[0]}", self.timeout):
                try:
                    node = self.fs.read_node(uri)
                except CtxError:
                    continue
                mine = {r for r in node.source_refs if r.startswith(prefixes)}
                if not mine:
                    continue
                if len(mine) == len(node.source_refs):
                    self.fs.delete(uri, recursive=False)
                    removed.append(uri)
                    report.agent_nodes_removed += 1
                    continue
                keep = [r for r in node.source_refs if r not in mine]
                clean = node.model_copy(
                    update={
                        "abstract": _drop_lines(node.abstract, prefixes),
                        "overview": _drop_lines(node.overview, prefixes),
                        "content": _drop_lines(node.content, prefixes),
                        "source_refs": keep,
                    }
                )
                change = NodeChange(action="erase", reason="a user's contribution was erased")
                stored = self.fs.write_node(clean, change=change)
                # the history held the erased text: it restarts at this version
                entry = HistoryEntry(
                    version=stored.version,
                    at=self.clock(),
                    action="erase",
                    reason="history reset: a user's contribution was erased",
                    content_hash=stored.content_hash,
                )
                path = self.fs.resolve_path(uri) / HISTORY_FILE
                atomic_write_file(path, entry.model_dump_json().encode("utf-8") + b"\n")
                rewritten.append(uri)
                report.agent_nodes_rewritten += 1
        return rewritten

    def _drop_edges(self, account: str, removed: set[str]) -> int:
        if not removed:
            return 0
        count = 0
        for scope in ("agents", "resources", "skills", "users", "sessions"):
            base = CtxURI.parse(f"ctx://{account}/{scope}/")
            if not self.fs.exists(base):
                continue
            for uri, _ in self.fs.walk_nodes(base):
                targets = [e.to_uri for e in self.relations.get_edges(uri) if e.to_uri in removed]
                if targets:
                    count += self.relations.remove_edges(uri, to_uris=targets)
        return count


def _drop_lines(text: str, prefixes: tuple[str, ...]) -> str:
    """`text` without the lines that cite one of the erased sessions' turns."""

    def cites(line: str) -> bool:
        for group in _MARKER_RE.findall(line):
            if any(p.strip().startswith(prefixes) for p in group.split(",")):
                return True
        return False

    return "\n".join(line for line in text.splitlines() if not cites(line))


def report_dict(report: ErasureReport) -> dict[str, Any]:
    return report.model_dump(mode="json")


__all__ = ["ErasureReport", "Replica", "UserEraser", "report_dict"]
