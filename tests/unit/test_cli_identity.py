"""One identity rule on the CLI: every read through the read path takes the same
--account/--user/--agent/--session options, defaulted from the URIs it names; the admin reads
(FS and ledger, no tenancy) say so in their help."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import typer
from typer.main import get_command

from ctxpipe.cli import app
from ctxpipe.cli.identity import request_context
from ctxpipe.core.errors import InvalidURIError

TENANT_READS = ("find", "search", "context", "read", "relations", "tags")
ADMIN_READS = ("ls", "cat", "stat", "tree", "history", "commits show", "commits list")
IDENTITY = {"--account": "-a", "--user": "-u", "--agent": None, "--session": "-s"}


@functools.cache
def root_command() -> Any:
    """The click command of `ctxpipe`, built once (typer builds it from every signature)."""
    return get_command(app)


def command(path: str) -> Any:
    """The click command of `ctxpipe PATH` (typer may bring its own click: no isinstance)."""
    cmd: Any = root_command()
    for name in path.split():
        cmd = cmd.commands[name]
    return cmd


def identity_options(cmd: Any) -> dict[str, tuple[tuple[str, ...], str | None]]:
    out = {}
    for p in cmd.params:
        long = next((o for o in p.opts if o in IDENTITY), None)
        if long is not None:
            assert p.param_type_name == "option"
            out[long] = (tuple(sorted(p.opts)), p.help)
    return out


def test_every_tenant_read_takes_the_same_identity_options() -> None:
    first = identity_options(command(TENANT_READS[0]))
    assert sorted(first) == sorted(IDENTITY)
    for long, short in IDENTITY.items():
        assert first[long][0] == tuple(sorted(o for o in (long, short) if o))
        assert "default" in (first[long][1] or "")
    for name in TENANT_READS[1:]:
        cmd = command(name)
        assert identity_options(cmd) == first, name
        assert not any(p.required for p in cmd.params if p.param_type_name == "option"), name


def test_admin_reads_say_so_and_take_no_identity() -> None:
    for name in ADMIN_READS:
        cmd = command(name)
        assert "Admin read (no tenancy)" in (cmd.help or ""), name
        assert identity_options(cmd) == {}, name


def test_the_uri_names_the_account_the_user_and_the_session() -> None:
    ctx = request_context(None, None, None, None, ["ctx://acme/users/alice/memories/profile"])
    assert (ctx.account_id, ctx.user_id, ctx.agent_id, ctx.session_id) == (
        "acme",
        "alice",
        "default",
        "cli",
    )
    ctx = request_context(None, "bob", None, None, ["ctx://acme/sessions/s-1/archives/1"])
    assert (ctx.account_id, ctx.user_id, ctx.session_id) == ("acme", "bob", "s-1")
    ctx = request_context(None, "bob", None, None, ["ctx://acme/agents/helper/memories/"])
    assert ctx.agent_id == "helper"


def test_options_win_over_the_uri() -> None:
    uri = "ctx://acme/users/alice/memories/profile"
    ctx = request_context("other", "carol", "bot", "s9", [uri])
    assert (ctx.account_id, ctx.user_id, ctx.agent_id, ctx.session_id) == (
        "other",
        "carol",
        "bot",
        "s9",
    )


@pytest.mark.parametrize(
    ("uris", "missing"),
    [([], "name the account"), (["ctx://acme/resources/docs/"], "name the user")],
)
def test_a_missing_identity_is_one_clear_error(uris: list[str], missing: str) -> None:
    with pytest.raises(typer.BadParameter, match=missing):
        request_context(None, None, None, None, uris)


def test_a_bad_uri_is_refused_before_any_read() -> None:
    with pytest.raises(InvalidURIError):
        request_context(None, None, None, None, ["file:///etc/passwd"])
