"""One identity rule for every read of the CLI that applies tenancy.

Each takes ``--account/-a``, ``--user/-u``, ``--agent`` and ``--session/-s``. An option left out
is taken from the ctx:// URIs the command names (its URI argument, or its ``--scope``
prefixes): ``ctx://ACCOUNT/users/USER/...`` names the account and the user,
``ctx://ACCOUNT/agents/AGENT/...`` the agent, ``ctx://ACCOUNT/sessions/SESSION/...`` the
session. The agent defaults to ``default`` and the session to ``cli``. Reads that look at the
FS or the ledger directly apply no tenancy; their help says so (`ADMIN_READ`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

import typer

from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI

ADMIN_READ = "Admin read (no tenancy): it sees every account and takes no --account/--user."

AccountOpt = Annotated[
    str | None,
    typer.Option("--account", "-a", help="account id [default: the account the URI names]"),
]
UserOpt = Annotated[
    str | None,
    typer.Option("--user", "-u", help="user id [default: the user the URI names]"),
]
AgentOpt = Annotated[
    str | None,
    typer.Option("--agent", help="agent id [default: the agent the URI names, else default]"),
]
SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session", "-s", help="session id [default: the session the URI names, else cli]"
    ),
]


def _owner(uris: list[CtxURI], scope: str) -> str | None:
    return next((u.segments[0] for u in uris if u.scope == scope and u.segments), None)


def request_context(
    account: str | None,
    user: str | None,
    agent: str | None,
    session: str | None,
    uris: Iterable[str | None] = (),
) -> RequestContext:
    """The request context of a read: the options given, else what `uris` name."""
    named = [CtxURI.parse(u) for u in uris if u]
    account = account or next((u.account for u in named), None)
    user = user or _owner(named, "users")
    if not account:
        raise typer.BadParameter(
            "name the account: --account/-a, or a ctx:// URI that names it", param_hint="--account"
        )
    if not user:
        raise typer.BadParameter(
            "name the user: --user/-u, or a URI under ctx://ACCOUNT/users/USER/",
            param_hint="--user",
        )
    return RequestContext(
        account_id=account,
        user_id=user,
        agent_id=agent or _owner(named, "agents") or "default",
        session_id=session or _owner(named, "sessions") or "cli",
    )


__all__ = ["ADMIN_READ", "AccountOpt", "AgentOpt", "SessionOpt", "UserOpt", "request_context"]
