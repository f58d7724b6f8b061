"""Warm the embedding model in commit workers as soon as a pool process starts.

The plan phase (on the `commit` queue) embeds candidates for dedup; loading the model on the
first plan after a (re)start took ~12 s. A pool process of a worker that consumes `commit`
loads it on a background thread instead, so it is ready before the first plan needs it and the
process takes tasks meanwhile (the load is idempotent and locked per process).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_init, worker_process_init

from tasks import context
from tasks.app import app
from tasks.queues import COMMIT

log = logging.getLogger(__name__)
_warm = {"model": False}


@worker_init.connect
def _note_queues(sender: Any = None, **_: Any) -> None:
    """In the parent, before the pool forks: does this node plan commits?"""
    try:
        queues = set(sender.app.amqp.queues.consume_from or ())
    except AttributeError:
        queues = set()
    _warm["model"] = COMMIT in queues


@worker_process_init.connect
def _warm_model(**_: Any) -> None:
    if not _warm["model"]:
        return

    def load() -> None:
        try:
            _ = context.runtime(app.conf.ctxpipe_settings).embedder.model
        except Exception as exc:  # noqa: BLE001 - the first plan loads it (and reports) anyway
            log.warning("embedding model warm-up failed: %s", exc)

    threading.Thread(target=load, name="ctxpipe-warm-model", daemon=True).start()
