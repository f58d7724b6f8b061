"""Erasure marks: the FS record that a user was erased, and when.

``{account}/users/.erased/{sha256(account/user)}.json`` — hidden (never listed, indexed or
repaired), keyed by a hash so the record names no one. It is written *before* the user's data
is removed: a commit accepted before that instant that reaches a write afterwards (under the
same locks the eraser takes) finds the mark and writes nothing, so no node of the user survives
a commit that raced with the erasure. Commits accepted later are a new start.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxpipe.core.errors import CtxError
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs.atomic import atomic_write_file
from ctxpipe.fs.context_fs import ContextFS

MARKS_DIR = ".erased"


class UserErasedError(CtxError):
    def __init__(self, account: str, user: str) -> None:
        super().__init__(
            f"user {user!r} of account {account!r} was erased after this commit was accepted: "
            "nothing of it is written"
        )


def user_hash(account: str, user: str) -> str:
    return hashlib.sha256(f"{account}/{user}".encode()).hexdigest()


class ErasureMarks:
    def __init__(self, fs: ContextFS) -> None:
        self._fs = fs

    def _path(self, account: str, user: str) -> Path:
        users = self._fs.resolve_path(CtxURI.parse(f"ctx://{account}/users/"))
        return users / MARKS_DIR / f"{user_hash(account, user)}.json"

    def read(self, account: str, user: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._path(account, user).read_bytes()))
        except (FileNotFoundError, ValueError):
            return None

    def erased_at(self, account: str, user: str) -> datetime | None:
        mark = self.read(account, user)
        return datetime.fromisoformat(mark["erased_at"]) if mark else None

    def write(self, account: str, user: str, record: dict[str, Any]) -> None:
        path = self._path(account, user)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_file(path, json.dumps(record, sort_keys=True, default=str).encode("utf-8"))

    def check(self, account: str, user: str, submitted_at: datetime) -> None:
        """UserErasedError when the user was erased at or after `submitted_at`."""
        erased = self.erased_at(account, user)
        if erased is not None and submitted_at <= erased:
            raise UserErasedError(account, user)


__all__ = ["MARKS_DIR", "ErasureMarks", "UserErasedError", "user_hash"]
