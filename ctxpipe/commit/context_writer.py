"""ContextWriter: applies WritePlans to the ContextFS, version-checked."""

from __future__ import annotations

import threading
from typing import Any

from ctxpipe.commit.policies.base import APPLIED_COMMITS_KEY
from ctxpipe.commit.tagging import TAGS_KEY, OwnerTagVocabulary, choose_tags
from ctxpipe.core.enums import ContextType, WriteAction
from ctxpipe.core.errors import CtxError
from ctxpipe.core.models import ContextNode, WritePlan, WriteResult
from ctxpipe.core.session import RequestContext
from ctxpipe.core.uri import CtxURI
from ctxpipe.fs import ContextFS
from ctxpipe.fs.history import NodeChange

MAX_APPLIED_COMMITS = 64
APPEND_SEPARATOR = "\n\n---\n\n"


def owner_space_of(uri: CtxURI) -> str:
    return f"{uri.scope}/{uri.segments[0]}" if uri.segments else uri.scope


def _owner_of(uri: CtxURI) -> CtxURI | None:
    if not uri.segments:
        return None
    return CtxURI.parse(f"ctx://{uri.account}/{uri.scope}/{uri.segments[0]}/")


class ContextWriter:
    def __init__(self, fs: ContextFS) -> None:
        self._fs = fs
        self._vocabularies: dict[str, OwnerTagVocabulary] = {}
        self._lock = threading.Lock()

    def load_vocabularies(self, uris: list[str], commit_id: str) -> None:
        """Read the tags of every owner space a commit writes to before its nodes are written
        (concurrently): each node then chooses its tags from the same vocabulary, whatever
        order the writes finish in."""
        for uri in uris:
            owner = _owner_of(CtxURI.parse(uri))
            if owner is not None and str(owner) not in self._vocabularies:
                vocab = OwnerTagVocabulary(self._fs, owner, exclude_commit=commit_id)
                vocab.find_tags("")  # load now
                self._vocabularies[str(owner)] = vocab

    def _tags(self, uri: CtxURI, text: str, existing: list[str], commit_id: str) -> list[str]:
        owner = _owner_of(uri)
        assert owner is not None
        with self._lock:
            vocab = self._vocabularies.get(str(owner))
            if vocab is None:
                vocab = OwnerTagVocabulary(self._fs, owner, exclude_commit=commit_id)
                self._vocabularies[str(owner)] = vocab
        return choose_tags(text, vocab, existing)

    def apply_plan(self, ctx: RequestContext, plan: WritePlan, commit_id: str) -> WriteResult:
        """Write one plan. Raises VersionConflictError when the node moved since planning."""
        if plan.action is WriteAction.SKIP:
            try:
                node = self._fs.read_node(plan.target_uri, include_content=False)
            except CtxError:
                version = self._fs.stat_node(plan.target_uri).version
                return WriteResult(
                    uri=plan.target_uri, action=WriteAction.SKIP, node_version=version
                )
            if commit_id in node.metadata.get(APPLIED_COMMITS_KEY, []):
                # a commit run again after a failed write phase re-plans as a duplicate of what
                # its first attempt wrote: report it as written, so its relations follow
                first = node.version == 1
                return WriteResult(
                    uri=plan.target_uri,
                    action=WriteAction.CREATE if first else WriteAction.MERGE,
                    node_version=node.version,
                    created=first,
                    updated=not first,
                )
            return WriteResult(
                uri=plan.target_uri, action=WriteAction.SKIP, node_version=node.version
            )
        uri = CtxURI.parse(plan.target_uri)
        is_node = self._fs.stat_node(uri, ctx=ctx).version > 0
        existing = self._fs.read_node(uri, ctx=ctx) if is_node else None
        if existing is not None and commit_id in existing.metadata.get(APPLIED_COMMITS_KEY, []):
            # A redelivered write phase: this commit already wrote the node before the crash.
            return WriteResult(
                uri=str(uri.node),
                action=plan.action,
                node_version=existing.version,
                created=plan.action is WriteAction.CREATE,
                updated=plan.action is not WriteAction.CREATE,
            )
        node = self._build(uri, plan, existing, commit_id)
        change = NodeChange(
            action=plan.action.value,
            commit_id=commit_id,
            source_refs=plan.source_refs,
            reason=plan.reason,
        )
        stored = self._fs.write_node(
            node, expected_version=plan.expected_version, ctx=ctx, change=change
        )
        changed = existing is None or stored.version != existing.version
        return WriteResult(
            uri=str(uri.node),
            action=plan.action,
            node_version=stored.version,
            created=existing is None,
            updated=existing is not None and changed,
        )

    def _build(
        self, uri: CtxURI, plan: WritePlan, existing: ContextNode | None, commit_id: str
    ) -> ContextNode:
        patch = plan.node_patch
        if plan.action is WriteAction.APPEND and existing is not None:
            patch = {
                "abstract": patch.get("abstract") or existing.abstract,
                "overview": patch.get("overview") or existing.overview,
                "content": existing.content + APPEND_SEPARATOR + patch.get("content", ""),
            }
        metadata: dict[str, Any] = dict(existing.metadata) if existing else {}
        metadata.update(plan.metadata_patch)
        applied = [c for c in metadata.get(APPLIED_COMMITS_KEY, []) if c != commit_id]
        metadata[APPLIED_COMMITS_KEY] = [*applied, commit_id][-MAX_APPLIED_COMMITS:]
        refs = list(dict.fromkeys([*(existing.source_refs if existing else []), *plan.source_refs]))
        old_tags = [t for t in metadata.get(TAGS_KEY) or [] if isinstance(t, str)]
        text = "\n".join(
            (
                str(metadata.get("routing_key", "")),
                patch.get("abstract", ""),
                patch.get("content", ""),
            )
        )
        metadata[TAGS_KEY] = self._tags(uri, text, old_tags, commit_id)
        return ContextNode(
            uri=str(uri.node),
            parent_uri=str(uri.parent.node),
            context_type=ContextType.MEMORY,
            category=plan.category.value
            if plan.category
            else (existing.category if existing else ""),
            owner_space=owner_space_of(uri),
            abstract=patch.get("abstract", ""),
            overview=patch.get("overview", ""),
            content=patch.get("content", ""),
            metadata=metadata,
            source_refs=refs,
        )
