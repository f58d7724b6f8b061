"""Real token counts for budgets: the embedding model's own tokenizer, read from disk.

`HFTokenCounter` loads ``tokenizer.json`` of the (packaged or local) sentence-transformers
model with the `tokenizers` library — no torch, no network — with truncation and padding off,
so a count is the true number of word pieces. `truncate` cuts a text at a token boundary so
that the result never counts more than asked.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from ctxpipe.core.caches import LockedCache
from ctxpipe.core.errors import EmbeddingError


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


class HFTokenCounter:
    """Token counter over a Hugging Face ``tokenizer.json`` (special tokens excluded)."""

    def __init__(self, tokenizer_file: Path | str, cache_size: int = 4096) -> None:
        from tokenizers import Tokenizer

        path = Path(tokenizer_file)
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # noqa: BLE001 - any loader failure is one clear error
            raise EmbeddingError(f"cannot load tokenizer {path}: {exc}") from exc
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.source = str(path)
        # snippets and lines are counted again on every query that returns them
        self._cache: LockedCache[int] = LockedCache.lru(cache_size)

    def __repr__(self) -> str:
        return f"HFTokenCounter({self.source!r})"

    def count(self, text: str) -> int:
        if not text:
            return 0
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        n = len(self._tok.encode(text, add_special_tokens=False).ids)
        self._cache.put(text, n)
        return n

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(t) for t in texts]

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` (cut at a token boundary) with at most `max_tokens`."""
        if not text:
            return ""
        enc = self._tok.encode(text, add_special_tokens=False)
        if len(enc.ids) <= max_tokens:
            return text
        if max_tokens <= 0:
            return ""
        end = enc.offsets[max_tokens - 1][1]
        # word pieces of one word share a word: never cut inside a word
        words = enc.word_ids
        if words[max_tokens] is not None and words[max_tokens] == words[max_tokens - 1]:
            start_of_word = next(
                (enc.offsets[i][0] for i in range(max_tokens) if words[i] == words[max_tokens]),
                0,
            )
            end = start_of_word
        out = text[:end].rstrip()
        while out and self.count(out) > max_tokens:  # defensive: never over the cap
            out = out[: max(0, len(out) - 1)].rstrip()
        return out


class WhitespaceTokenCounter:
    """A dependency-free counter (one token per whitespace-separated word) for unit tests."""

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        words = text.split()
        if len(words) <= max_tokens:
            return text
        return " ".join(words[: max(0, max_tokens)])


def tokenizer_file(model_name: str) -> Path:
    """``tokenizer.json`` of a packaged model name or a local model directory."""
    from ctxpipe.providers.embedder import resolve_model_path

    path = Path(resolve_model_path(model_name))
    candidate = path / "tokenizer.json"
    if not candidate.is_file():
        raise EmbeddingError(
            f"no tokenizer.json under {path} for model {model_name!r}: token budgets need the "
            "model's tokenizer on disk"
        )
    return candidate


@lru_cache(maxsize=4)
def counter_for_model(model_name: str) -> HFTokenCounter:
    """One shared counter per model (loading takes ~60 ms)."""
    return HFTokenCounter(tokenizer_file(model_name))


__all__ = [
    "HFTokenCounter",
    "TokenCounter",
    "WhitespaceTokenCounter",
    "counter_for_model",
    "tokenizer_file",
]
