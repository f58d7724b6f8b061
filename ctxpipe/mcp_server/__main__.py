"""`python -m ctxpipe.mcp_server`: the MCP server on a machine with the client and the `mcp`
extra only (`pip install 'ctxpipe[mcp]'`); `ctxpipe mcp` is the same on a server install.

The API and the key come from the options or from `CTXPIPE_API_URL` / `CTXPIPE_API_KEY`."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from ctxpipe.mcp_server.server import build_server

DEFAULT_API_URL = "http://127.0.0.1:8080"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ctxpipe.mcp_server", description=__doc__)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--api-url", default=os.environ.get("CTXPIPE_API_URL", DEFAULT_API_URL))
    parser.add_argument(
        "--api-key",
        default=os.environ.get("CTXPIPE_API_KEY"),
        help="key for stdio (over HTTP each request brings its own)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    server = build_server(args.api_url, args.api_key)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
