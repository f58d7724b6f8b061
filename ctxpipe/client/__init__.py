"""The Python client of the ctxpipe API (httpx; sync and async): what producers and agents use
instead of importing the engine."""

from ctxpipe.client._base import CommitFailedError, CtxApiError
from ctxpipe.client.async_ import AsyncCtxClient
from ctxpipe.client.sync import CtxClient

__all__ = ["AsyncCtxClient", "CommitFailedError", "CtxApiError", "CtxClient"]
