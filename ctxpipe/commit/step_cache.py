"""StepCache: the parsed requests of the commits whose steps this process runs."""

from __future__ import annotations

from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.caches import LockedCache
from ctxpipe.storage.commit_ledger import JsonObject


class StepCache:
    """A commit's request is write-once and the next phase of a commit often runs in the same
    worker process, so each request is parsed once per process, not once per step."""

    def __init__(self, maxsize: int = 512) -> None:
        # bounded: a worker runs commits for days; 512 is far above the commits it has in flight
        self._requests: LockedCache[CommitRequest] = LockedCache.lru(maxsize)

    def request(self, commit_id: str, raw: JsonObject) -> CommitRequest:
        """The request of `commit_id`, parsed from the ledger's `raw` form on first use."""
        req = self._requests.get(commit_id)
        if req is None:
            req = self.remember(CommitRequest.model_validate(raw))
        return req

    def remember(self, req: CommitRequest) -> CommitRequest:
        self._requests.put(req.commit_id, req)
        return req

    def clear(self) -> None:
        self._requests.clear()
