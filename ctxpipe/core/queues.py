"""The names of the Celery queues, defined once and free of Celery.

`tasks.queues` routes the tasks onto them; `ctxpipe status`, the API's metrics and the dev
stack read their depths on the broker by these names."""

from __future__ import annotations

from typing import Final

COMMIT: Final = "commit"
EXTRACT: Final = "extract"
EMBED: Final = "embed"
MAINTENANCE: Final = "maintenance"
QUEUES: Final = (COMMIT, EXTRACT, EMBED, MAINTENANCE)

__all__ = ["COMMIT", "EMBED", "EXTRACT", "MAINTENANCE", "QUEUES"]
