"""What an export covers and the stable order it walks it in.

A selection is everything (every account), one account, or one owner of an account: a user
(``ctx://A/users/U/`` and the sessions whose recorded owner is that user) or an agent
(``ctx://A/agents/X/``). The walk is pre-order with siblings sorted by name, which is the order
of `NodeRecord.key`; `after` skips every entry up to and including that key (whole subtrees
are skipped without being read), so an export resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctxpipe.core.errors import InvalidURIError
from ctxpipe.core.uri import SCOPES, CtxURI
from ctxpipe.fs import ContextFS
from ctxpipe.fs.listing import sorted_dirs
from ctxpipe.fs.session_owner import SessionOwners

Key = tuple[str, ...]


@dataclass(frozen=True)
class Selection:
    """`account` None: every account; `user` / `agent`: only that owner of `account`."""

    account: str | None = None
    user: str | None = None
    agent: str | None = None

    def __post_init__(self) -> None:
        if (self.user or self.agent) and not self.account:
            raise ValueError("an owner (user or agent) is one of an account: name the account")
        if self.user and self.agent:
            raise ValueError("export a user or an agent, not both")
        if self.account is not None:  # each name must be one a URI can hold
            CtxURI.parse(f"ctx://{self.account}/users/")
            if self.user:
                CtxURI.parse(f"ctx://{self.account}/users/{self.user}/")
            if self.agent:
                CtxURI.parse(f"ctx://{self.account}/agents/{self.agent}/")

    def describe(self) -> str:
        if self.account is None:
            return "every account"
        if self.user:
            return f"user {self.user} of account {self.account}"
        if self.agent:
            return f"agent {self.agent} of account {self.account}"
        return f"account {self.account}"

    def includes_owner(self, owners: SessionOwners, account: str, scope: str, name: str) -> bool:
        """Whether the owner directory ``ctx://account/scope/name/`` is in the selection."""
        if self.account is not None and account != self.account:
            return False
        if self.user:
            if scope == "users":
                return name == self.user
            if scope == "sessions":
                owner = owners.owner(account, name)
                return owner is not None and owner.user_id == self.user
            return False
        if self.agent:
            return scope == "agents" and name == self.agent
        return True


def _skippable(key: Key, after: Key | None) -> bool:
    """Every key at or below `key` sorts at or before `after` (the subtree is done)."""
    return after is not None and key < after and after[: len(key)] != key


@dataclass(frozen=True)
class Entry:
    """A directory the export visits: a node (`is_node`) and/or a session's owner dir."""

    key: Key
    uri: CtxURI
    path: Path
    is_node: bool
    is_session: bool


def walk(fs: ContextFS, selection: Selection, after: Key | None = None) -> Iterator[Entry]:
    """The selection's directories in stable order, those after `after` only."""
    owners = SessionOwners(fs)
    accounts = sorted_dirs(fs.fs_root)
    for acct in accounts:
        if selection.account is not None and acct.name != selection.account:
            continue
        for scope_dir in sorted_dirs(acct):
            if scope_dir.name not in SCOPES or _skippable((acct.name, scope_dir.name), after):
                continue
            for owner_dir in sorted_dirs(scope_dir):
                key = (acct.name, scope_dir.name, owner_dir.name)
                if _skippable(key, after):
                    continue
                if not selection.includes_owner(owners, *key):
                    continue
                yield from _subtree(fs, key, owner_dir, after)


def _subtree(fs: ContextFS, key: Key, path: Path, after: Key | None) -> Iterator[Entry]:
    try:
        uri = CtxURI(key[0], key[1], key[2:], True)
        CtxURI.parse(str(uri))  # a directory whose name is no URI segment is not ours
    except InvalidURIError:
        return
    if after is None or key > after:
        is_node = fs.is_node_dir(path)
        is_session = key[1] == "sessions" and len(key) == 3
        if is_node or is_session:
            yield Entry(key, uri, path, is_node, is_session)
    for child in sorted_dirs(path):
        child_key = (*key, child.name)
        if not _skippable(child_key, after):
            yield from _subtree(fs, child_key, child, after)


def key_of(uri: str) -> Key:
    u = CtxURI.parse(uri)
    return (u.account, u.scope, *u.segments)


__all__ = ["Entry", "Key", "Selection", "key_of", "walk"]
