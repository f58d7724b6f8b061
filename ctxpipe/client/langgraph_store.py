"""A LangGraph `BaseStore` on the ctxpipe API.

Namespaces are ctx:// owner spaces of the key's account: ``("users", user_id, *path)``,
``("agents", agent_id, *path)`` (the ones a request may see). Keys are node URIs.

- `search(namespace, query=…)` is a find limited to that space;
- `put(namespace, key, value)` commits a one-message session (the value's ``content`` or
  ``text``, else its JSON) for the namespace's user: the pipeline extracts the memory, as from
  any conversation; `put(…, None)` (delete) removes the node `key`;
- `get(namespace, key)` reads the node `key` (L2);
- `list_namespaces` gives the two owner spaces of the acting user and agent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TypedDict

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ctxpipe.client._base import CtxApiError
from ctxpipe.client.sync import CtxClient

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Owner(TypedDict, total=False):
    """The owner a namespace names: a user or an agent."""

    user_id: str
    agent_id: str


class CtxStore(BaseStore):
    """``CtxStore(CtxClient(url, key, user_id=…))``; `wait`: a put returns once its commit
    finished (else at once, while the workers extract it)."""

    def __init__(self, client: CtxClient, *, wait: bool = True, timeout: float = 120.0) -> None:
        self.client = client
        self.wait = wait
        self.timeout = timeout
        me = client.whoami()
        self.account = me.account_id
        self.user = me.user_id or client.defaults.user_id
        self.agent = me.agent_id or client.defaults.agent_id or "default"

    # ------------------------------------------------------------------ mapping
    def space_uri(self, namespace: tuple[str, ...]) -> str:
        """The ctx:// directory of a namespace: `("users", id, ...)` or `("agents", id, ...)`."""
        if len(namespace) < 2 or namespace[0] not in ("users", "agents"):
            raise ValueError(
                f"namespace {namespace!r} must start with ('users', user_id) or "
                "('agents', agent_id)"
            )
        return f"ctx://{self.account}/" + "/".join(namespace) + "/"

    def _who(self, namespace: tuple[str, ...]) -> _Owner:
        if namespace[0] == "users":
            return {"user_id": namespace[1]}
        return {"agent_id": namespace[1]}

    # ------------------------------------------------------------------ ops
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph store operations (get, search, put, delete, list namespaces) in order."""
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` on a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, ListNamespacesOp):
            spaces: list[tuple[str, ...]] = [("users", self.user or ""), ("agents", self.agent)]
            return [s for s in spaces if s[1]][op.offset : op.offset + op.limit]
        raise TypeError(f"unsupported store operation {type(op).__name__}")

    def _get(self, op: GetOp) -> Item | None:
        who = self._who(op.namespace)
        try:
            text = self.client.read(op.key, 2, **who)
        except CtxApiError as exc:
            if exc.status == 404:
                return None
            raise
        return Item(
            namespace=op.namespace,
            key=op.key,
            value={"text": text, "uri": op.key},
            created_at=_EPOCH,
            updated_at=_EPOCH,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = self.space_uri(op.namespace_prefix)
        res = self.client.find(
            op.query or "*",
            min(200, op.offset + op.limit),
            scopes=[scope],
            **self._who(op.namespace_prefix),
        )
        out = []
        for h in res.hits[op.offset : op.offset + op.limit]:
            value = {"text": h.text, "uri": h.uri, "source_refs": h.source_refs}
            if op.filter and any(value.get(k) != v for k, v in op.filter.items()):
                continue
            out.append(
                SearchItem(
                    namespace=op.namespace_prefix,
                    key=h.uri,
                    value=value,
                    created_at=_EPOCH,
                    updated_at=_EPOCH,
                    score=h.score,
                )
            )
        return out

    def _put(self, op: PutOp) -> None:
        who = self._who(op.namespace)
        if op.value is None:
            self.client.remove(op.key, **who)
            return
        text = op.value.get("content") or op.value.get("text")
        content = str(text) if text else json.dumps(op.value, ensure_ascii=False, default=str)
        digest = hashlib.sha256(
            json.dumps([list(op.namespace), op.key, content]).encode()
        ).hexdigest()[:24]
        cid = self.client.commit(
            [{"id": "m1", "role": "user", "content": content}],
            session_id=f"store-{digest}",
            commit_id=f"store-{digest}",
            **who,
        )
        if self.wait:
            self.client.wait(cid, self.timeout)


__all__ = ["CtxStore"]
