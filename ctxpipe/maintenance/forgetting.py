"""Forgetting: which memories go, and removing them.

Policies, applied in this order (Hybrid = TTL, then capacity or value):

1. **TTL** per category — a memory not updated nor recalled for `ttl_days[category]` days;
2. **capacity** per owner and category — above `capacity[category]` nodes, the least valuable
   go until the owner is back at the cap;
3. **value** — a memory whose value is below `min_value`.

value = ln(1+recalls)·w_recall + average recall score·w_score + 1/(1+days since last
recall)·w_recency, from the recall statistics the read path records (a memory never recalled
counts its days since it was last updated). Defaults keep everything; session archives are never
forgotten here (they are the record memories derive from).

A forgotten node is removed from the FS under its owner lock, its history closed with a
`forget` entry kept as a tombstone, and a DELETE_CONTEXT event registered so the replica
follows. The clock is injected, so every policy is testable without waiting.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ctxpipe.core.config import ForgettingConfig
from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.errors import CtxError
from ctxpipe.core.models import OutboxEvent, utcnow
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs import ContextFS, OwnerLock
from ctxpipe.fs.atomic import META_FILE
from ctxpipe.fs.history import NodeChange

MEMORY_SCOPES = ("users", "agents")


class Recall(BaseModel):
    count: int = 0
    avg_score: float = 0.0
    last_at: datetime | None = None


class Outbox(Protocol):
    def append_batch(self, events: list[OutboxEvent]) -> list[OutboxEvent]: ...


RecallLookup = Callable[[str, list[str]], dict[str, Recall]]


class MemoryItem(BaseModel):
    uri: str
    account: str
    owner_space: str
    category: str
    version: int
    updated_at: datetime
    recall: Recall = Field(default_factory=Recall)
    value: float = 0.0


class Doomed(BaseModel):
    uri: str
    category: str
    owner_space: str
    policy: str  # ttl | capacity | value
    reason: str
    value: float


def node_value(item: MemoryItem, now: datetime, cfg: ForgettingConfig) -> float:
    last = item.recall.last_at or item.updated_at
    days = max(0.0, (now - last).total_seconds() / 86400)
    return (
        math.log1p(item.recall.count) * cfg.recall_weight
        + item.recall.avg_score * cfg.score_weight
        + 1.0 / (1.0 + days) * cfg.recency_weight
    )


def _scan_metas(directory: str) -> Iterator[dict[str, Any]]:
    """Every `.meta.json` below `directory`, parsed, read without locks: a node's meta file is
    replaced by one atomic rename, so it is always a whole old or new version (the removal
    re-checks the node under its lock). Hidden entries and symlinks are skipped."""
    stack = [directory]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                continue
            stack.append(e.path)
            try:
                with open(os.path.join(e.path, META_FILE), "rb") as fh:
                    yield json.loads(fh.read())
            except (FileNotFoundError, NotADirectoryError, ValueError):
                continue


def memories(fs: ContextFS) -> Iterator[MemoryItem]:
    """Every memory node of every account (users' and agents' `memories/` trees)."""
    for root in fs.roots():
        for scope in MEMORY_SCOPES:
            base = CtxURI.parse(f"ctx://{root.account}/{scope}/")
            for owner in fs.list_children(base) if fs.exists(base) else []:
                mem = fs.resolve_path(CtxURI.parse(owner.uri).join("memories"))
                for meta in _scan_metas(str(mem)):
                    try:
                        yield MemoryItem(
                            uri=meta["uri"],
                            account=root.account,
                            owner_space=f"{scope}/{owner.name}",
                            category=meta.get("category", ""),
                            version=int(meta["version"]),
                            updated_at=datetime.fromisoformat(meta["updated_at"]),
                        )
                    except (KeyError, TypeError, ValueError):
                        continue


def plan_forgetting(
    items: Iterable[MemoryItem],
    cfg: ForgettingConfig,
    now: datetime,
    recall: RecallLookup | None = None,
) -> list[Doomed]:
    """What the policies would forget now, and why (nothing is changed)."""
    by_account: dict[str, list[MemoryItem]] = defaultdict(list)
    for it in items:
        by_account[it.account].append(it)
    doomed: list[Doomed] = []
    for account, its in sorted(by_account.items()):
        stats = recall(account, [i.uri for i in its]) if recall else {}
        for it in its:
            it.recall = stats.get(it.uri, Recall())
            it.value = node_value(it, now, cfg)
        doomed += _plan_account(its, cfg, now)
    return doomed[: cfg.max_per_run]


def _plan_account(items: list[MemoryItem], cfg: ForgettingConfig, now: datetime) -> list[Doomed]:
    out: list[Doomed] = []
    gone: set[str] = set()
    for it in items:  # 1. TTL
        ttl = cfg.ttl_days.get(it.category)
        if ttl is None:
            continue
        last = max(it.updated_at, it.recall.last_at or it.updated_at)
        idle = (now - last).total_seconds() / 86400
        if idle > ttl:
            out.append(_doom(it, "ttl", f"untouched for {idle:.0f} days (ttl {ttl:g} days)"))
            gone.add(it.uri)
    groups: dict[tuple[str, str], list[MemoryItem]] = defaultdict(list)
    for it in items:
        if it.uri not in gone:
            groups[(it.owner_space, it.category)].append(it)
    for (_, category), group in sorted(groups.items()):  # 2. capacity, least valuable first
        cap = cfg.capacity.get(category)
        if cap is None or len(group) <= cap:
            continue
        ranked = sorted(group, key=lambda i: (i.value, i.updated_at, i.uri))
        for it in ranked[: len(group) - cap]:
            out.append(
                _doom(it, "capacity", f"{len(group)} {category} memories over the cap of {cap}")
            )
            gone.add(it.uri)
    if cfg.min_value is not None:  # 3. value
        for it in items:
            if it.uri not in gone and it.value < cfg.min_value:
                out.append(_doom(it, "value", f"value {it.value:.3f} < {cfg.min_value:g}"))
    return out


def _doom(it: MemoryItem, policy: str, reason: str) -> Doomed:
    return Doomed(
        uri=it.uri,
        category=it.category,
        owner_space=it.owner_space,
        policy=policy,
        reason=reason,
        value=round(it.value, 4),
    )


class Forgetter:
    """Removes what `plan_forgetting` chose: FS first (under the owner lock, with a tombstone
    in the node's history), then one DELETE_CONTEXT event per node."""

    def __init__(
        self,
        fs: ContextFS,
        lock: OwnerLock,
        cfg: ForgettingConfig,
        outbox: Outbox | None = None,
        recall: RecallLookup | None = None,
        clock: Callable[[], datetime] = utcnow,
        lock_timeout_s: float = 30.0,
    ) -> None:
        self.fs = fs
        self.lock = lock
        self.cfg = cfg
        self.outbox = outbox
        self.recall = recall
        self.clock = clock
        self.lock_timeout_s = lock_timeout_s

    def plan(self) -> list[Doomed]:
        return plan_forgetting(memories(self.fs), self.cfg, self.clock(), self.recall)

    def run(self, dry_run: bool = False) -> dict[str, Any]:
        doomed = self.plan()
        if dry_run:
            return {"dry_run": True, "forgotten": [d.model_dump() for d in doomed]}
        done: list[Doomed] = []
        events: list[OutboxEvent] = []
        for d in doomed:
            u = CtxURI.parse(d.uri)
            key = f"{u.account}/{u.scope}/{u.segments[0]}"
            with self.lock.hold(key, self.lock_timeout_s):
                try:
                    version = self.fs.stat_node(d.uri).version
                    if version == 0:
                        continue  # gone meanwhile
                    change = NodeChange(action="forget", reason=f"{d.policy}: {d.reason}")
                    self.fs.forget(d.uri, change)
                except CtxError:
                    continue
            done.append(d)
            events.append(
                OutboxEvent(
                    event_id=OutboxEvent.make_id(
                        OutboxEventType.DELETE_CONTEXT, d.uri, f"{version}-forgotten"
                    ),
                    event_type=OutboxEventType.DELETE_CONTEXT,
                    uri=d.uri,
                    payload={"version": version, "reason": f"forgotten ({d.policy})"},
                )
            )
        warning = ""
        if events and self.outbox is not None:
            try:
                self.outbox.append_batch(events)
            except Exception as exc:  # noqa: BLE001 - repair removes the orphaned rows later
                warning = f"outbox registration failed (repair will remove the rows): {exc}"
        return {
            "dry_run": False,
            "forgotten": [d.model_dump() for d in done],
            "warning": warning,
        }


__all__ = [
    "Doomed",
    "Forgetter",
    "MemoryItem",
    "Recall",
    "memories",
    "node_value",
    "plan_forgetting",
]
