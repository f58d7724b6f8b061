"""CommitJournal: the FS record of finished commits, so re-running a commit id is a no-op.

Stored as a hidden file beside the session's nodes (`{session}/.commits/{commit_id}.json`):
invisible to listings, globbing, indexing and repair, written atomically after phase 5.
"""

from __future__ import annotations

from pathlib import Path

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.models import CommitResult
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs import ContextFS
from ctxpipe.fs.atomic import atomic_write_file


class CommitJournal:
    def __init__(self, fs: ContextFS) -> None:
        self._fs = fs

    def _path(self, req: CommitRequest) -> Path:
        session = CtxURI.parse(f"ctx://{req.ctx.account_id}/sessions/{req.ctx.session_id}/")
        return self._fs.resolve_path(session) / ".commits" / f"{req.commit_id}.json"

    def load(self, req: CommitRequest) -> CommitResult | None:
        path = self._path(req)
        if not path.is_file():
            return None
        return CommitResult.model_validate_json(path.read_bytes())

    def save(self, req: CommitRequest, result: CommitResult) -> None:
        path = self._path(req)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_file(path, result.model_dump_json().encode("utf-8"))
