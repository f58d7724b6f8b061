"""Knobs of the read path (`ctxpipe.retrieval`), kept in `core` so that `Settings` can carry
them: `CTXPIPE_RETRIEVAL__FIND__TOP_K=20` sets one, `CTXPIPE_RETRIEVAL_PRESET=fast|thorough`
starts from a named recipe (`PRESETS`; values set one by one win over the preset's).

Defaults: the original constants of hierarchical retrieval and of the context builder, tuned
where noted (docs/retrieval.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

RetrievalPreset = Literal["default", "fast", "thorough"]


class FindConfig(BaseModel):
    """Hybrid `find`: pgvector cosine fused with PostgreSQL full-text rank (RRF)."""

    top_k: int = Field(
        10, ge=1, le=200, description="hits a find returns when the request names no top_k"
    )
    rrf_k: int = Field(60, ge=1, description="reciprocal rank fusion constant")
    vector_weight: float = Field(1.0, ge=0.0, description="weight of the vector arm in the fusion")
    text_weight: float = Field(1.0, ge=0.0, description="weight of the full-text arm in the fusion")
    candidates: int = Field(40, ge=1, le=1000, description="rows each arm contributes")
    common_word_ratio: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="a query word in more than this share of the scope's chunks is a stopword "
        "of that scope: neither embedded nor matched on (0: off)",
    )
    send_text_arm_first: bool = Field(
        True,
        description="send the full-text arm's statement before the query is embedded, so the "
        "database ranks the text while the model runs, then read it (off: embed first, then "
        "run the text arm)",
    )
    overlap_embedding: bool = Field(
        False,
        description="embed the query on a second thread while this one runs the full-text arm "
        "(the two Python threads contend for the interpreter lock, and where the database "
        "shares the host's few cores, for those too); over send_text_arm_first",
    )
    max_query_terms: int = Field(
        12, ge=1, le=64, description="query terms the full-text arm matches at most"
    )
    text_max_df_ratio: float = Field(
        0.02, gt=0.0, le=1.0, description="terms in more of the scope's chunks are not matched on"
    )
    text_min_df_cap: int = Field(200, ge=1, description="...unless in at most this many chunks")
    text_max_rows: int = Field(1000, ge=1, description="chunks the full-text arm ranks at most")
    df_sample_rows: int = Field(5000, ge=100, description="rows sampled for IDF in large scopes")
    # plan choice: exact scan of the owner's rows when there are few of them
    exact_scan_max_rows: int = Field(
        20000,
        ge=0,
        description="an owner scope of at most this many rows is scanned exactly (no HNSW index)",
    )
    ef_search: int = Field(120, ge=1, le=1000, description="HNSW `ef_search` of the vector arm")
    max_scan_tuples: int = Field(
        20000, ge=1, description="HNSW iterative scan: tuples visited at most"
    )
    count_cache_s: float = Field(10.0, ge=0.0, description="owner row counts are cached this long")
    # sentence ranking inside the candidates
    dense_rows: int = Field(24, ge=0, description="chunks whose lines are ranked by cosine")
    stored_units: bool = Field(
        True, description="use the unit vectors stored at index time (off: encode at query time)"
    )
    # what a hit returns
    snippet_tokens: int = Field(
        96,
        ge=8,
        description="token cap of a hit's text: its sentence grown with the turn around it",
    )
    abstract_tokens: int = Field(32, ge=8, description="token cap of the L0 line of a hit")
    max_hits_per_uri: int = Field(
        8,
        ge=1,
        description="hits of one node at most (a session archive is one node: a day's turns)",
    )
    record_recalls: bool = Field(
        True, description="count each hit as a recall of its node (recall statistics, forgetting)"
    )
    # graph signal (graph distance): candidates related to the best ones
    graph_weight: float = Field(
        0.0, ge=0.0, description="weight of the graph ranking in the fusion (0: off)"
    )
    graph_seeds: int = Field(3, ge=1, description="best candidate chunks whose nodes seed it")
    # date signal: lines dated when the query says ("on 13 October 2023", "in September")
    date_weight: float = Field(
        1.0, ge=0.0, description="weight of the match with the dates the query names (0: off)"
    )


class HierarchicalConfig(BaseModel):
    """HierarchicalRetriever constants. Original values: global_top_k 3, alpha 0.5, SQL
    drill-down; the defaults (pool 20, alpha 0.7, global_top_k 5) were chosen by a sweep on
    the first three LoCoMo dev conversations (README, Retrieval)."""

    global_top_k: int = Field(
        5, ge=1, description="best items of the global step that start the drill-down"
    )
    children_top_k: int = Field(5, ge=1, description="children searched per directory or node")
    final_take: int = Field(10, ge=1, description="items a typed query returns")
    alpha: float = Field(0.7, ge=0.0, le=1.0, description="final = a*child + (1-a)*parent")
    max_convergence_rounds: int = Field(
        3, ge=1, description="rounds the top-k may stay put before the drill-down stops"
    )
    convergence_threshold: float = Field(
        0.001, ge=0.0, description="a change of the top-k mean below this counts as put"
    )
    max_rounds: int = Field(32, ge=1, description="hard stop on drill-down rounds")
    pool: int = Field(
        20,
        ge=0,
        description="drill down inside find's best `pool` hits for the query, on find's own "
        "scores (0: search each directory and node again in SQL)",
    )


class IntentConfig(BaseModel):
    """IntentAnalyzer constants."""

    max_queries: int = Field(
        5, ge=0, le=5, description="typed queries intent analysis makes at most"
    )
    recent_messages: int = Field(5, ge=0, description="recent messages intent analysis reads")
    fallback_to_query: bool = Field(
        True, description="on an LLM failure, search with the raw query"
    )


class ContextConfig(BaseModel):
    """Context builder constants."""

    default_budget: int = Field(
        4096, ge=1, description="token budget of a context when the request names none"
    )
    system_prompt_tokens: int = Field(
        500, ge=0, description="tokens reserved for the system prompt"
    )
    min_segment_tokens: int = Field(100, ge=0, description="tokens each section keeps at least")
    history_length_threshold: int = Field(
        20, ge=0, description="turns past which the conversation's share of the budget shrinks"
    )
    short_term_reduction_ratio: float = Field(
        0.375,
        ge=0.0,
        le=1.0,
        description="how much of its share a long conversation gives up",
    )
    long_term_increase_ratio: float = Field(
        0.333,
        ge=0.0,
        description="long-term memory's share grows by this much of itself in a long conversation",
    )
    recent_turns: int = Field(3, ge=0, description="the most recent turns get a higher priority")
    max_turns: int = Field(10, ge=0, description="recent turns a context carries at most")
    memory_top_k: int = Field(12, ge=0, description="memories fetched for a context at least")
    retrieval_top_k: int = Field(
        12, ge=0, description="resources and skills fetched for a context at least"
    )
    tokens_per_hit: int = Field(
        25,
        ge=1,
        description="hits asked of find per typed query: budget / this (at least the "
        "top_k above, at most max_hits)",
    )
    max_hits: int = Field(60, ge=1, description="hits asked of find per typed query at most")
    replies: bool = Field(
        True,
        description="an archive hit that ends with a question is shown with its answer: the "
        "next turn of its chunk, said by another speaker (the answer repeats few of the words "
        "a query shares with the question)",
    )
    about_speaker: bool = Field(
        True,
        description="a query that names one participant of the retrieved turns is about them: "
        "turns said by the others (and not answered by them) go after the rest of the evidence",
    )
    snapshots_per_process: int = Field(
        256, ge=1, description="incremental-context snapshots a process keeps in memory"
    )


class RetrievalConfig(BaseModel):
    """The read path's knobs: find, hierarchical search, intent analysis, context building
    (`CTXPIPE_RETRIEVAL__FIND__TOP_K=20`; a preset, `CTXPIPE_RETRIEVAL_PRESET`, sets several
    at once)."""

    find: FindConfig = FindConfig()
    hierarchical: HierarchicalConfig = HierarchicalConfig()
    intent: IntentConfig = IntentConfig()
    context: ContextConfig = ContextConfig()


# Named recipes (after Graphiti's search-config recipes), only from values the sweeps of
# docs/retrieval.md covered: `fast` ranks fewer candidates and fewer dense rows with the
# stored unit vectors (no encoding at query time) and drills down in a smaller pool;
# `thorough` ranks more candidates and dense rows and drills down in a larger pool.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "default": {},
    "fast": {
        "find": {"candidates": 20, "dense_rows": 12, "stored_units": True},
        "hierarchical": {"pool": 15},
    },
    "thorough": {
        "find": {"candidates": 80, "dense_rows": 48},
        "hierarchical": {"pool": 40},
    },
}


def preset_values(name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The raw values of preset `name` with `overrides` (section → field → value) laid on
    top: what `RetrievalConfig.model_validate` takes."""
    if name not in PRESETS:
        raise ValueError(f"retrieval preset {name!r} is not one of {', '.join(PRESETS)}")
    out: dict[str, Any] = {k: dict(v) for k, v in PRESETS[name].items()}
    for section, values in (overrides or {}).items():
        if isinstance(values, Mapping) and isinstance(out.get(section), dict):
            out[section] = {**out[section], **values}
        else:
            out[section] = values
    return out


def retrieval_preset(name: str) -> RetrievalConfig:
    """The `RetrievalConfig` of preset `name` (`default`, `fast`, `thorough`)."""
    return RetrievalConfig.model_validate(preset_values(name))


__all__ = [
    "PRESETS",
    "ContextConfig",
    "FindConfig",
    "HierarchicalConfig",
    "IntentConfig",
    "RetrievalConfig",
    "RetrievalPreset",
    "preset_values",
    "retrieval_preset",
]
