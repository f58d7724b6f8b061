"""The ledger suite's fixtures: `ledger`, each implementation in turn (every test that takes it
runs once on the in-memory ledger and once on PostgreSQL; `-k memory` needs no server), and
`make_components`, commit components without a database (the FS, the rules LLM, an outbox in a
dict), so the ledger is the only thing that differs between the two runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ledger_world import Ledger, MakeComponents
from outbox_twin import MemoryOutbox

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.memory_ledger import InMemoryLedger
from ctxpipe.core.config import Settings
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime
from ctxpipe.storage.commit_ledger import CommitLedger


@pytest.fixture(params=["memory", "postgresql"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    """Each implementation of the ledger, empty (the PostgreSQL one on the suite's migrated
    test database, its tables truncated)."""
    if request.param == "memory":
        yield InMemoryLedger()
    else:
        request.getfixturevalue("clean_db")
        yield CommitLedger(request.getfixturevalue("database"))


@pytest.fixture
def make_components(make_settings: Callable[..., Settings]) -> MakeComponents:
    """Commit components on their own FS, without a database: `make(llm=None,
    extraction_calls=None)` (the settings' default: one extraction call per session)."""
    count = iter(range(100))

    def make(llm: Any = None, extraction_calls: str | None = None) -> CommitComponents:
        settings = make_settings(db=False, redis=False)
        settings = settings.model_copy(update={"fs_root": settings.fs_root / str(next(count))})
        if extraction_calls is not None:
            config = settings.commit.model_copy(update={"extraction_calls": extraction_calls})
            settings = settings.model_copy(update={"commit": config})
        comp = Runtime(settings, llm=llm or RulesLLM(), use_database=False).components()
        comp.outbox = MemoryOutbox()  # type: ignore[assignment]
        return comp

    return make
