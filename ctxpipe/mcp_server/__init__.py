"""The MCP server of ctxpipe (`ctxpipe mcp`): tools over the HTTP API, with the same keys."""

from ctxpipe.mcp_server.server import build_server

__all__ = ["build_server"]
