"""The variants of bench/locomo_recall.py: find, search or build_context with some of their
config values changed (`--variant`, `--search-variant`, `--context-variant`), each a system of
its own over the same index, built once per run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ctxpipe.retrieval.config import ContextConfig, FindConfig  # noqa: E402
from ctxpipe.retrieval.context.context_builder import ContextBuilder  # noqa: E402
from ctxpipe.retrieval.find.hybrid_finder import HybridFinder  # noqa: E402
from ctxpipe.retrieval.read_path import ReadPath  # noqa: E402
from ctxpipe.retrieval.search.search_engine import SearchEngine  # noqa: E402

_FINDERS: dict[str, HybridFinder] = {}
_SEARCHES: dict[str, SearchEngine] = {}
_BUILDERS: dict[str, ContextBuilder] = {}


def parse_variant(spec: str, model: type[BaseModel] = FindConfig) -> dict[str, Any]:
    """``snippet_tokens=96,dense_rows=32`` -> values of `model` (validated)."""
    update: dict[str, Any] = {}
    for part in spec.split(","):
        key, _, value = part.partition("=")
        if key.strip() not in model.model_fields or not value:
            raise SystemExit(f"{spec!r}: {key!r} is not a {model.__name__} field=value")
        update[key.strip()] = value.strip()
    return model(**update).model_dump(include=set(update))


FIND_PREFIX = "find."  # a --context-variant key of the finder the context retrieves with


def parse_context_variant(spec: str) -> dict[str, Any]:
    """``replies=false,find.dense_rows=32`` -> ContextConfig values, and FindConfig values
    (of the finder the builder retrieves with) under their ``find.`` keys."""
    parts = [p for p in spec.split(",") if p.strip()]
    found = [p.strip()[len(FIND_PREFIX) :] for p in parts if p.strip().startswith(FIND_PREFIX)]
    own = [p for p in parts if not p.strip().startswith(FIND_PREFIX)]
    update = parse_variant(",".join(own), ContextConfig) if own else {}
    if found:
        finder = parse_variant(",".join(found))
        update |= {FIND_PREFIX + k: v for k, v in finder.items()}
    return update


def find_variant(read: ReadPath, system: str, update: dict[str, Any]) -> HybridFinder:
    """A finder over the same index with some FindConfig values changed."""
    if system not in _FINDERS:
        base = read.finder
        cfg = base.config.model_copy(update={**update, "record_recalls": False})
        _FINDERS[system] = HybridFinder(
            base.db, base.embedder, read.counter, schema=base.schema, config=cfg
        )
    return _FINDERS[system]


def search_variant(read: ReadPath, system: str, update: dict[str, Any]) -> SearchEngine:
    """A search over the same finder with some HierarchicalConfig values changed."""
    if system not in _SEARCHES:
        cfg = read.searcher.config.model_copy(update=update)
        _SEARCHES[system] = SearchEngine(read.finder, read.intent, cfg)
    return _SEARCHES[system]


def context_variant(read: ReadPath, system: str, update: dict[str, Any]) -> ContextBuilder:
    """A context builder over the same read path with some ContextConfig values changed (and
    a finder of its own where `update` has ``find.`` keys)."""
    if system not in _BUILDERS:
        base = read.builder
        finder = base.finder
        own = {k: v for k, v in update.items() if not k.startswith(FIND_PREFIX)}
        found = {k[len(FIND_PREFIX) :]: v for k, v in update.items() if k.startswith(FIND_PREFIX)}
        if found:
            finder = find_variant(read, system, found)
        _BUILDERS[system] = ContextBuilder(
            base.counter,
            finder=finder,
            fs=base.fs,
            intent=base.intent,
            config=base.config.model_copy(update=own),
            schema=base.schema,
        )
    return _BUILDERS[system]
