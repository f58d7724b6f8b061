"""Removal of one memory by its owner (what an agent's "delete" means): the node leaves the FS
under the owner lock with a tombstone closing its history, and one DELETE_CONTEXT event takes
it out of the index replica."""

from __future__ import annotations

from typing import Any, Protocol

from ctxpipe.core.config import Settings
from ctxpipe.core.enums import OutboxEventType
from ctxpipe.core.models import OutboxEvent
from ctxpipe.core.session import RequestContext
from ctxpipe.fs import ContextFS
from ctxpipe.fs.history import NodeChange
from ctxpipe.retrieval.access import OwnerAccessError, check_readable


class RemovalParts(Protocol):
    """What a removal needs of the runtime (typed here: `maintenance` sits below `runtime`)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def fs(self) -> ContextFS: ...
    @property
    def lock(self) -> Any: ...
    @property
    def outbox(self) -> Any: ...
    @property
    def use_database(self) -> bool: ...


def remove_memory(rt: RemovalParts, uri: str, ctx: RequestContext, reason: str = "") -> bool:
    """Remove the memory node `uri` of `ctx`'s own user space; False when there is none.

    Only ``users/{ctx.user_id}/…`` below the space root can be removed this way (another
    owner's node: `OwnerAccessError`, another account's: `TenancyError`)."""
    u = check_readable(ctx, uri)
    if u.scope != "users" or len(u.segments) < 2:
        raise OwnerAccessError(str(u), f"user {ctx.user_id!r} (only its own memories)")
    key = f"{u.account}/{u.scope}/{u.segments[0]}"
    with rt.lock.hold(key, rt.settings.lock_timeout_s):
        version = rt.fs.stat_node(u).version
        if not version:
            return False
        change = NodeChange(action="delete", reason=reason or "removed by its owner")
        rt.fs.forget(u, change)
    if rt.use_database:
        node = str(u).rstrip("/")
        rt.outbox.append_batch(
            [
                OutboxEvent(
                    event_id=OutboxEvent.make_id(
                        OutboxEventType.DELETE_CONTEXT, node, f"{version}-removed"
                    ),
                    event_type=OutboxEventType.DELETE_CONTEXT,
                    uri=node,
                    payload={"version": version, "reason": "removed by its owner"},
                )
            ]
        )
    return True
