"""Provider protocols (LLM, embedder, vector index). Implementations live beside this module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, Field

from ctxpipe.core.models import LLMUsage
from ctxpipe.core.session import RequestContext
from ctxpipe.core.thread_loop import run_sync

T = TypeVar("T", bound=BaseModel)

__all__ = [
    "LLM",
    "Embedder",
    "EmbeddingVector",
    "LLMUsage",
    "Span",
    "SpanEmbedder",
    "VectorHit",
    "VectorIndex",
    "run_sync",
]


@runtime_checkable
class LLM(Protocol):
    """Structured-output LLM. `variables` are the prompt's jinja2 variables; the returned
    object is an instance of `schema`, already validated."""

    name: str

    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T: ...

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: type[T],
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> T: ...


class EmbeddingVector(BaseModel):
    dense_vector: list[float]
    model: str = ""


@runtime_checkable
class Embedder(Protocol):
    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Normalised dense vectors, one per text (sync, batched)."""
        ...

    async def embed_texts(self, texts: Sequence[str]) -> list[EmbeddingVector]: ...

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the model's own tokenizer."""
        ...

    @property
    def max_seq_length(self) -> int: ...


Span = Sequence[tuple[int, int]]  # a part of a text: its (start, end) character ranges


@runtime_checkable
class SpanEmbedder(Protocol):
    """An `Embedder` that also gives, from one pass over a text, the vectors of parts of it."""

    @property
    def pools_spans(self) -> bool: ...

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]], *, fit: bool = False
    ) -> Sequence[Any]:
        """For each text: its vector, then the vector of each of its spans (rows of a float
        array, or lists). `fit`: a text longer than the model reads gets None instead."""
        ...


class VectorHit(BaseModel):
    uri: str
    score: float
    level: int = 0
    category: str = ""
    owner_space: str = ""
    abstract: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class VectorIndex(Protocol):
    """Similarity search over the index replica (used by the dedup prefilter)."""

    async def search(
        self,
        query_vector: list[float],
        filters: dict[str, Any],
        top_k: int = 10,
        level: int = 0,
    ) -> list[VectorHit]: ...
