"""The client stands alone: importing it (sync, async, the LangGraph store) or the MCP server
loads no server package, so an agent machine installs httpx and pydantic only."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from early_processes import Command, EarlyProcesses

import ctxpipe

SERVER_PACKAGES = ("fastapi", "psycopg", "redis", "celery", "torch", "sentence_transformers")
# what the client side may load of ctxpipe: itself and the shared models (pydantic only)
CLIENT_SIDE = ("ctxpipe.client", "ctxpipe.mcp_server")
SHARED = {
    "ctxpipe",
    "ctxpipe.core",
    *(f"ctxpipe.core.{m}" for m in ("enums", "errors", "models", "session")),
}


PROBES = {
    "client": "import ctxpipe.client, ctxpipe.client.langgraph_store, ctxpipe.mcp_server.__main__\n"
    "from ctxpipe.client import AsyncCtxClient, CtxClient",
    "api": "import ctxpipe.api.app",
}


_ROOT = str(Path(ctxpipe.__file__).resolve().parents[1])  # this checkout's ctxpipe
_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")])}
# For each probe, `sys.modules` of a fresh interpreter after its code; the interpreters start
# when collection ends and run side by side (early_processes.py).
PROCESSES = EarlyProcesses(
    __name__,
    {
        name: Command(
            [
                sys.executable,
                "-c",
                f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))",
            ],
            _ENV,
        )
        for name, code in PROBES.items()
    },
)


@pytest.fixture(scope="module")
def probed() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, done in PROCESSES.outputs().items():
        assert done.returncode == 0, done.stderr
        out[name] = set(json.loads(done.stdout.splitlines()[-1]))
    return out


def loaded(modules: set[str], package: str) -> bool:
    return any(m == package or m.startswith(package + ".") for m in modules)


def test_the_client_loads_no_server_package(probed: dict[str, set[str]]) -> None:
    mods = probed["client"]
    assert {"ctxpipe.client.sync", "ctxpipe.client.async_", "httpx", "pydantic"} <= mods
    assert "ctxpipe.mcp_server.server" in mods and "ctxpipe.client.langgraph_store" in mods
    assert [p for p in SERVER_PACKAGES if loaded(mods, p)] == []
    ours = {m for m in mods if m == "ctxpipe" or m.startswith("ctxpipe.")}
    assert sorted(m for m in ours if m not in SHARED and not m.startswith(CLIENT_SIDE)) == []


def test_the_probe_sees_a_server_import(probed: dict[str, set[str]]) -> None:
    """The same probe does see the server packages when the API is imported."""
    mods = probed["api"]
    assert loaded(mods, "fastapi") and loaded(mods, "psycopg") and loaded(mods, "redis")


def test_the_mcp_server_runs_without_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m ctxpipe.mcp_server` takes the API and the key from the environment."""
    from ctxpipe.mcp_server.__main__ import parse

    monkeypatch.setenv("CTXPIPE_API_URL", "http://api.example:8080")
    monkeypatch.setenv("CTXPIPE_API_KEY", "ctx_0123456789abcdef_secret")
    args = parse([])
    assert (args.transport, args.api_url, args.api_key) == (
        "stdio",
        "http://api.example:8080",
        "ctx_0123456789abcdef_secret",
    )
    assert parse(["--transport", "http", "--port", "9000"]).port == 9000


def test_the_command_on_a_client_install_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the server packages `ctxpipe` names the install to make, no traceback."""
    import builtins

    from ctxpipe.__main__ import main

    real_import = builtins.__import__

    def no_typer(name: str, *args: object, **kwargs: object) -> object:
        if name == "typer" or name.startswith("typer."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    for mod in [m for m in sys.modules if m == "ctxpipe.cli" or m.startswith("ctxpipe.cli.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", no_typer)
    with pytest.raises(SystemExit) as stop:
        main()
    assert "pip install 'ctxpipe[server]'" in str(stop.value) and "typer" in str(stop.value)
