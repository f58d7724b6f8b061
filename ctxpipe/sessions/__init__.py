"""Open sessions: messages appended one call at a time, durably and in order, and cut into
commits (by size, idle time or an explicit close) that go through the usual submit path."""

from ctxpipe.sessions.open_sessions import OpenSessions
from ctxpipe.sessions.rules import CutRules
from ctxpipe.sessions.store import OpenSessionStore

__all__ = ["CutRules", "OpenSessionStore", "OpenSessions"]
