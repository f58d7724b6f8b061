"""The Python client of the ctxpipe API (httpx; sync and async): what producers and agents use
instead of importing the engine; a find, search or build_context may be passed whole as its
typed request (`FindRequest`, `SearchRequest`, `ContextRequest`)."""

from ctxpipe.client._base import CommitFailedError, CtxApiError
from ctxpipe.client.async_ import AsyncCtxClient
from ctxpipe.client.context_request import ContextRequest
from ctxpipe.client.find_request import FindRequest
from ctxpipe.client.search_request import SearchRequest
from ctxpipe.client.sync import CtxClient

__all__ = [
    "AsyncCtxClient",
    "CommitFailedError",
    "ContextRequest",
    "CtxApiError",
    "CtxClient",
    "FindRequest",
    "SearchRequest",
]
