"""The local development stack (`ctxpipe dev …`): PostgreSQL + pgvector, Redis, one Celery
worker per queue, beat and Flower as background processes under `{var_dir}/dev/`."""

from ctxpipe.devstack.models import Component, StackStatus
from ctxpipe.devstack.stack import DevStack, dev_dir

__all__ = ["Component", "DevStack", "StackStatus", "dev_dir"]
