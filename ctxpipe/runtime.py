"""Runtime: builds the concrete adapters from one `Settings` (the composition helper used by
the service, the CLI and the Celery tasks). Heavy parts (DB pool, model) load lazily."""

from __future__ import annotations

from functools import cached_property

from ctxpipe.commit.components import CommitComponents
from ctxpipe.commit.step_cache import StepCache
from ctxpipe.core.config import Settings
from ctxpipe.fs import ContextFS, FSRelationStore, LocalOwnerLock, OwnerLock
from ctxpipe.providers.base import LLM
from ctxpipe.providers.embedder import SentenceTransformerEmbedder
from ctxpipe.providers.factory import make_embedder, make_llm
from ctxpipe.providers.latency import LatencyLLM
from ctxpipe.providers.pgvector_index import PgVectorIndex
from ctxpipe.providers.prompts import PromptRegistry, default_registry
from ctxpipe.providers.traced_llm import TracedLLM
from ctxpipe.storage.db import Database
from ctxpipe.storage.outbox_store import OutboxStore


class Runtime:
    def __init__(
        self,
        settings: Settings,
        *,
        lock: OwnerLock | None = None,
        llm: LLM | None = None,
        use_database: bool = True,
    ) -> None:
        self.settings = settings
        self._lock = lock
        self._llm = llm
        self.use_database = use_database

    @cached_property
    def fs(self) -> ContextFS:
        self.settings.fs_root.mkdir(parents=True, exist_ok=True)
        return ContextFS(self.settings.fs_root)

    @cached_property
    def relations(self) -> FSRelationStore:
        return FSRelationStore(self.fs)

    @cached_property
    def lock(self) -> OwnerLock:
        return self._lock or LocalOwnerLock(self.settings.fs_root)

    @cached_property
    def prompts(self) -> PromptRegistry:
        return default_registry()

    @cached_property
    def llm(self) -> LLM:
        llm = self._llm or make_llm(self.settings, self.prompts)
        # a span per call (GenAI conventions) when tracing is on; the model: the configured
        # one for an HTTP provider, the provider's own name for the offline rules
        provider = self.settings.llm_provider
        model = self.settings.llm_model if provider == "openai" else llm.name
        if self.settings.llm_simulated_latency_s > 0:
            llm = LatencyLLM(llm, self.settings.llm_simulated_latency_s)
        return TracedLLM(llm, provider=provider, model=model)

    @cached_property
    def db(self) -> Database:
        return Database.from_settings(self.settings)

    @cached_property
    def embedder(self) -> SentenceTransformerEmbedder:
        return make_embedder(self.settings)

    @cached_property
    def vector_index(self) -> PgVectorIndex:
        return PgVectorIndex(self.db, schema=self.settings.db_schema)

    @cached_property
    def outbox(self) -> OutboxStore:
        return OutboxStore.from_settings(self.db, self.settings)

    @cached_property
    def step_cache(self) -> StepCache:
        return StepCache()

    def components(self) -> CommitComponents:
        db = self.use_database
        return CommitComponents(
            settings=self.settings,
            fs=self.fs,
            relations=self.relations,
            llm=self.llm,
            lock=self.lock,
            prompts=self.prompts,
            embedder=self.embedder if db else None,
            vector_index=self.vector_index if db else None,
            outbox=self.outbox if db else None,
            step_cache=self.step_cache,
        )

    def database_reachable(self, timeout_s: float = 2.0) -> bool:
        """A quick check, so in-process commands can run without the index replica."""
        import psycopg

        try:
            with psycopg.connect(
                self.settings.database_url, connect_timeout=max(1, int(timeout_s))
            ):
                return True
        except psycopg.Error:
            return False

    def close(self) -> None:
        if "db" in self.__dict__:
            self.db.close()
