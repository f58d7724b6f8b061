"""What `ctxpipe dev status --json` reports (also returned by `up` and `down`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Kind = Literal["postgres", "redis", "worker", "beat", "flower", "api", "supervisor"]


class Component(BaseModel):
    """One piece of the stack."""

    name: str  # postgres, redis, worker-commit, …, beat, flower (= the compose service names)
    kind: Kind
    alive: bool
    managed: bool = True  # False: an external server given by URL (never started/stopped)
    action: str = ""  # set by up/down: started, already running, external, stopped, …
    pid: int | None = None
    pids: list[int] = Field(default_factory=list)  # pid + children (prefork pool, backends)
    port: int | None = None
    endpoint: str = ""  # redacted URL, Celery node name, or http address
    detail: str = ""
    log: str | None = None
    restarts: int = 0  # times the supervisor started it again after it died


class StackStatus(BaseModel):
    var_dir: str
    dev_dir: str
    alive: bool  # every component is alive
    running: int  # how many components are alive
    components: list[Component]

    def get(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)


__all__ = ["Component", "Kind", "StackStatus"]
