"""The HTTP API (`ctxpipe serve`): FastAPI over `ContextEngineService`, per-account keys."""

from ctxpipe.api.app import create_app

__all__ = ["create_app"]
