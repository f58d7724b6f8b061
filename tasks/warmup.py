"""Warm the embedding model in commit workers before the first plan needs it.

The plan phase (on the `commit` queue) embeds candidates for dedup; on the first plan after a
(re)start, importing the model's libraries and loading the model took 12–20 s on two busy
cores. A worker node that consumes `commit` imports the libraries in its parent, before the
pool forks and before it takes any task (its pool processes inherit them: a node killed while
it boots loses no task), and each pool process loads the model on a background thread (about
a second), taking tasks meanwhile (the load is idempotent and locked per process).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_init, worker_process_init

from ctxpipe.providers.embedder import import_libraries
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
    if _warm["model"]:
        try:
            took = import_libraries()
        except Exception as exc:  # noqa: BLE001 - each pool process imports (and reports) them
            log.warning("could not import the embedding libraries before the fork: %s", exc)
        else:
            log.info("embedding libraries imported before the fork in %.1fs", took)


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
