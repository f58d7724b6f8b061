"""An `Importer` from the application's adapters (`ctxpipe.runtime.Runtime` is one)."""

from __future__ import annotations

from typing import Protocol

from ctxpipe.core.config import Settings
from ctxpipe.fs import ContextFS, OwnerLock
from ctxpipe.portability.importer import Importer
from ctxpipe.storage.outbox_store import OutboxStore


class PortabilityAdapters(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def fs(self) -> ContextFS: ...
    @property
    def lock(self) -> OwnerLock: ...
    @property
    def outbox(self) -> OutboxStore: ...
    @property
    def use_database(self) -> bool: ...


def make_importer(rt: PortabilityAdapters, *, replace: bool = False) -> Importer:
    """Writes through `rt`'s FS under its owner lock; events to its outbox when it has a
    database (without one the replica catches up by `ctxpipe repair --full`)."""
    return Importer(
        rt.fs,
        rt.lock,
        rt.outbox if rt.use_database else None,
        lock_timeout_s=rt.settings.lock_timeout_s,
        max_retries=rt.settings.outbox_max_retries,
        replace=replace,
    )


__all__ = ["PortabilityAdapters", "make_importer"]
