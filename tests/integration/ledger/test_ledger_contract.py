"""The contract itself: both ledgers have the port's signatures, and the in-memory ledger is the
twin of every method of the SQL ledger and of every named query it runs."""

from __future__ import annotations

import inspect
import re
from typing import Any

from ctxpipe.commit.ledger import LedgerPort
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.storage.commit_ledger import CommitLedger
from ctxpipe.storage.migrations import default_sql_dir


def public_methods(cls: type) -> dict[str, Any]:
    return {n: v for n, v in vars(cls).items() if inspect.isfunction(v) and n[0] != "_"}


def test_both_ledgers_have_the_ports_signatures() -> None:
    members = public_methods(LedgerPort)
    assert len(members) == 12
    for name in members:
        port = inspect.signature(getattr(LedgerPort, name))
        for impl in (CommitLedger, InMemoryLedger):
            assert inspect.signature(getattr(impl, name)) == port, f"{impl.__name__}.{name}"


def test_every_method_of_the_sql_ledger_has_its_in_memory_twin() -> None:
    """The sweeper, the reaper, status and the CLI read the ledger beyond the steps' port:
    the twin answers all of it, with the same signatures."""
    sql, twin = public_methods(CommitLedger), public_methods(InMemoryLedger)
    assert set(sql) == set(twin)
    for name in sql:
        assert inspect.signature(sql[name]) == inspect.signature(twin[name]), name


def test_every_named_ledger_query_has_its_in_memory_twin() -> None:
    text = (default_sql_dir() / "queries" / "ledger.sql").read_text(encoding="utf-8")
    queries = re.findall(r"^--\s*name:\s*(\w+)\s*$", text, re.M)
    assert len(queries) > 15
    docs = " ".join(inspect.getdoc(m) or "" for m in public_methods(InMemoryLedger).values())
    named = set(re.findall(r"`(\w+)`", docs))
    assert set(queries) <= named, sorted(set(queries) - named)
