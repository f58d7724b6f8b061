"""Knobs of the read path. Defaults: the original constants of hierarchical retrieval and of
the context builder, tuned where noted.

`RetrievalConfig` is a plain pydantic model: the composition root builds it (or uses the
defaults); nothing here reads the environment.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class FindConfig(BaseModel):
    """Hybrid `find`: pgvector cosine fused with PostgreSQL full-text rank (RRF)."""

    top_k: int = Field(10, ge=1, le=200)
    rrf_k: int = Field(60, ge=1, description="reciprocal rank fusion constant")
    vector_weight: float = Field(1.0, ge=0.0)
    text_weight: float = Field(1.0, ge=0.0)
    candidates: int = Field(40, ge=1, le=1000, description="rows each arm contributes")
    max_query_terms: int = Field(12, ge=1, le=64)
    text_max_df_ratio: float = Field(
        0.02, gt=0.0, le=1.0, description="terms in more of the scope's chunks are not matched on"
    )
    text_min_df_cap: int = Field(200, ge=1, description="...unless in at most this many chunks")
    text_max_rows: int = Field(1000, ge=1, description="chunks the full-text arm ranks at most")
    df_sample_rows: int = Field(5000, ge=100, description="rows sampled for IDF in large scopes")
    # plan choice: exact scan of the owner's rows when there are few of them
    exact_scan_max_rows: int = Field(20000, ge=0)
    ef_search: int = Field(120, ge=1, le=1000)
    max_scan_tuples: int = Field(20000, ge=1)
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
    max_hits_per_uri: int = Field(3, ge=1)
    record_recalls: bool = True
    # graph signal (graph distance): candidates related to the best ones
    graph_weight: float = Field(
        0.0, ge=0.0, description="weight of the graph ranking in the fusion (0: off)"
    )
    graph_seeds: int = Field(3, ge=1, description="best candidate chunks whose nodes seed it")


class HierarchicalConfig(BaseModel):
    """HierarchicalRetriever constants. Original values: global_top_k 3, alpha 0.5, SQL
    drill-down; the defaults (pool 20, alpha 0.7, global_top_k 5) were chosen by a sweep on
    the first three LoCoMo dev conversations (README, Retrieval)."""

    global_top_k: int = Field(5, ge=1)
    children_top_k: int = Field(5, ge=1)
    final_take: int = Field(10, ge=1)
    alpha: float = Field(0.7, ge=0.0, le=1.0, description="final = a*child + (1-a)*parent")
    max_convergence_rounds: int = Field(3, ge=1)
    convergence_threshold: float = Field(0.001, ge=0.0)
    max_rounds: int = Field(32, ge=1, description="hard stop on drill-down rounds")
    pool: int = Field(
        20,
        ge=0,
        description="drill down inside find's best `pool` hits for the query, on find's own "
        "scores (0: search each directory and node again in SQL)",
    )


class IntentConfig(BaseModel):
    """IntentAnalyzer constants."""

    max_queries: int = Field(5, ge=0, le=5)
    recent_messages: int = Field(5, ge=0)
    fallback_to_query: bool = True


class ContextConfig(BaseModel):
    """Context builder constants."""

    default_budget: int = Field(4096, ge=1)
    system_prompt_tokens: int = Field(500, ge=0)
    min_segment_tokens: int = Field(100, ge=0)
    history_length_threshold: int = Field(20, ge=0)
    short_term_reduction_ratio: float = Field(0.375, ge=0.0, le=1.0)
    long_term_increase_ratio: float = Field(0.333, ge=0.0)
    recent_turns: int = Field(3, ge=0, description="the most recent turns get a higher priority")
    max_turns: int = Field(10, ge=0)
    memory_top_k: int = Field(12, ge=0)
    retrieval_top_k: int = Field(12, ge=0)
    tokens_per_hit: int = Field(
        25,
        ge=1,
        description="hits asked of find per typed query: budget / this (at least the "
        "top_k above, at most max_hits)",
    )
    max_hits: int = Field(60, ge=1)
    snapshots_per_process: int = Field(256, ge=1)


class RetrievalConfig(BaseModel):
    find: FindConfig = FindConfig()
    hierarchical: HierarchicalConfig = HierarchicalConfig()
    intent: IntentConfig = IntentConfig()
    context: ContextConfig = ContextConfig()


__all__ = [
    "ContextConfig",
    "FindConfig",
    "HierarchicalConfig",
    "IntentConfig",
    "RetrievalConfig",
]
