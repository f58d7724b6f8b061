"""OpenSessions from the application's parts: the PostgreSQL store (the in-memory twin when
there is no database: in-process use), the rules and limits of the settings, the embedding
model's tokenizer, the FS's session owners, and the commit submit path it is handed."""

from __future__ import annotations

from ctxpipe.core.config import Settings
from ctxpipe.fs.context_fs import ContextFS
from ctxpipe.fs.session_owner import SessionOwners
from ctxpipe.retrieval.tokens import counter_for_model
from ctxpipe.sessions.memory_store import InMemoryOpenSessionStore
from ctxpipe.sessions.open_sessions import OpenSessions, Submit
from ctxpipe.sessions.pg_store import PgOpenSessionStore
from ctxpipe.sessions.rules import CutRules
from ctxpipe.sessions.store import OpenSessionStore
from ctxpipe.storage.db import Database


def make_open_sessions(
    settings: Settings, db: Database | None, fs: ContextFS, submit: Submit
) -> OpenSessions:
    store: OpenSessionStore = (
        PgOpenSessionStore(db, schema=settings.db_schema)
        if db is not None
        else InMemoryOpenSessionStore()
    )
    counter = counter_for_model(settings.embedding_model)
    return OpenSessions(
        store,
        CutRules.from_settings(settings),
        submit,
        counter.count,
        limits=settings.limits,
        owner_check=SessionOwners(fs).check_commit,
    )


__all__ = ["make_open_sessions"]
