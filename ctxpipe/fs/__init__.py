"""ctxpipe.fs: the filesystem primary store (ContextFS), its relation store and locks."""

from ctxpipe.fs.context_fs import ContextFS, NodeMeta, owner_space_of
from ctxpipe.fs.locks import LocalOwnerLock, OwnerLock
from ctxpipe.fs.relation_store import FSRelationStore

__all__ = [
    "ContextFS",
    "FSRelationStore",
    "LocalOwnerLock",
    "NodeMeta",
    "OwnerLock",
    "owner_space_of",
]
