"""TokenReader: how the index path feeds a sentence-transformers model — each text tokenized
once, batches by padded tokens, spans pooled on the model's device, the device kept busy.

- **One tokenization**: the model's fast tokenizer (`tokenizers`) encodes every text of a call
  in one batched call, with offsets; the model's input ids and the span masks both come from it
  (sentence-transformers' `encode` would tokenize again).
- **Batches by tokens**: texts sorted by length, a batch closed when one more text would pad
  it past `batch_tokens`: short texts are never padded to a long one, and a batch of short
  texts holds many.
- **Pooling on the device**: each batch's span masks are one ``[texts, spans, tokens]`` tensor;
  a span's vector is a row of one batched matrix product with the token embeddings, divided by
  its token count and normalised there; one copy back per batch.
- **Overlap**: batch k+1 is prepared and launched before batch k's vectors are copied back, so
  on a GPU the host's work on the next batch runs while the device computes.

Every vector is float32 on the host. The text's own vector is the model's `sentence_embedding`
(its own pooling, normalised), equal to `SentenceTransformer.encode`'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ctxpipe.providers.base import Span

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

Precision = Literal["float32", "float16", "bfloat16"]


def token_counts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Tokens of each text (no special tokens), in one batched call of a `tokenizers.Tokenizer`
    without truncation."""
    return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def token_starts(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Where each token of each text starts (character offsets, in order), in one batched
    call: what the chunker cuts by."""
    out = []
    for e in tokenizer.encode_batch(list(texts), add_special_tokens=False):
        starts = [a for a, _ in e.offsets]
        starts.sort()  # in order already (timsort checks that in one pass): bisect needs it
        out.append(starts)
    return out


def splits_words_first(tokenizer: Any) -> bool:
    """Whether the tokenizer splits at spaces and punctuation before it splits words, so that
    a span of a text cut between words holds exactly the text's tokens inside it."""
    pre = type(tokenizer.pre_tokenizer).__name__ if tokenizer.pre_tokenizer else ""
    return pre in ("BertPreTokenizer", "Whitespace", "WhitespaceSplit")


def token_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices of texts of these token lengths, longest first, in batches whose padded size
    (texts × longest) stays within `batch_tokens` (a text longer than that is a batch alone);
    no text is padded to more than twice its length (a batch closes before one shorter)."""
    out: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda k: -lengths[k]):
        longest = lengths[out[-1][0]] if out else 0
        if not out or (len(out[-1]) + 1) * longest > batch_tokens or 2 * lengths[i] < longest:
            out.append([])
        out[-1].append(i)
    return out


def span_ranges(spans: Sequence[Span]) -> Any:
    """``[spans, ranges, 2]`` int array of each span's (start, end) character ranges, padded
    with empty ranges (a span without ranges is all padding: it takes the text's vector)."""
    width = max((len(r) for r in spans), default=0) or 1
    pad = [(0, 0)] * width
    rows = [[*r, *pad[len(r) :]] for r in spans]  # one conversion to numpy for all of them
    return np.asarray(rows, dtype=np.int64).reshape(len(spans), width, 2)


def span_mask(offsets: Any, ranges: Any) -> Any:
    """``[..., spans, tokens]`` booleans: the real tokens (not special: non-empty offsets) that
    overlap a span's ranges. `offsets`: ``[..., tokens, 2]``; `ranges`: ``[..., spans, ranges,
    2]`` (numpy or torch, batched or not)."""
    starts, ends = offsets[..., 0], offsets[..., 1]  # [..., T]
    lo, hi = ranges[..., 0], ranges[..., 1]  # [..., S, R]
    real = (ends > starts)[..., None, None, :]
    hits = (starts[..., None, None, :] < hi[..., None]) & (ends[..., None, None, :] > lo[..., None])
    return (hits & real).any(-2)  # [..., S, T]


class TokenReader:
    """Reads texts through one loaded sentence-transformers model (see the module doc)."""

    def __init__(
        self,
        model: SentenceTransformer,
        max_seq_length: int,
        batch_tokens: int = 8192,
        precision: Precision = "float32",
    ) -> None:
        import torch
        from tokenizers import Tokenizer

        self.model = model
        self.device = model.device
        self.batch_tokens = max(int(batch_tokens), int(max_seq_length))
        hf = model.tokenizer
        self.tokenizer = Tokenizer.from_str(hf.backend_tokenizer.to_str())  # our own settings
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=int(max_seq_length))
        self.plain = Tokenizer.from_str(hf.backend_tokenizer.to_str())  # counts: whole texts
        self.plain.no_padding()
        self.plain.no_truncation()
        self.word_additive = splits_words_first(self.plain)
        self.inputs = [n for n in hf.model_input_names if n in ("token_type_ids", "attention_mask")]
        self.pad_id = int(hf.pad_token_id or 0)
        self.cuda = self.device.type == "cuda"
        self.dtype = getattr(torch, precision) if self.cuda else torch.float32

    # ------------------------------------------------------------------ reading
    def read(
        self,
        texts: Sequence[str],
        spans: Sequence[Sequence[Span]],
        timings: dict[str, float] | None = None,
        *,
        fit: bool = False,
    ) -> list[Any]:
        """Per text: a float32 array, its vector then one row per span (see the module doc).
        `fit`: a text longer than the model reads is not read (None in its place)."""
        timings = timings if timings is not None else {}
        started = time.perf_counter()
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        lengths = [len(e.ids) for e in encodings]
        todo = [i for i, e in enumerate(encodings) if not (fit and e.overflowing)]
        _add(timings, "tokenize", started)
        out: list[Any] = [None] * len(texts)
        pending: tuple[list[int], list[int], Any, Any] | None = None
        for part in token_batches([lengths[i] for i in todo], self.batch_tokens):
            batch = [todo[k] for k in part]
            started = time.perf_counter()
            inputs, masks, rows = self._prepare(batch, encodings, spans)
            _add(timings, "prepare", started)
            launched = self._launch(inputs, masks, timings)
            if pending is not None:
                self._collect(pending, out, timings)
            pending = (batch, rows, *launched)
        if pending is not None:
            self._collect(pending, out, timings)
        return out

    def _prepare(
        self, batch: list[int], encodings: Sequence[Any], spans: Sequence[Sequence[Span]]
    ) -> tuple[dict[str, Any], Any, list[int]]:
        """The batch's padded inputs, token offsets and span ranges (numpy)."""
        width = len(encodings[batch[0]].ids)
        rows = [len(spans[i]) for i in batch]
        ranges_width = max((len(r) for i in batch for r in spans[i]), default=0) or 1
        ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
        attention = np.zeros((len(batch), width), dtype=np.int64)
        types = np.zeros((len(batch), width), dtype=np.int64)
        offsets = np.zeros((len(batch), width, 2), dtype=np.int64)
        ranges = np.zeros((len(batch), max(rows, default=0), ranges_width, 2), dtype=np.int64)
        for b, i in enumerate(batch):
            enc = encodings[i]
            n = len(enc.ids)
            ids[b, :n] = enc.ids
            attention[b, :n] = 1
            if "token_type_ids" in self.inputs:
                types[b, :n] = enc.type_ids
            if rows[b]:
                offsets[b, :n] = enc.offsets
                got = span_ranges(spans[i])
                ranges[b, : rows[b], : got.shape[1]] = got
        inputs = {"input_ids": ids, "attention_mask": attention}
        if "token_type_ids" in self.inputs:
            inputs["token_type_ids"] = types
        return inputs, (offsets, ranges), rows

    def _launch(
        self, inputs: dict[str, Any], where: tuple[Any, Any], timings: dict[str, float]
    ) -> tuple[Any, Any]:
        """Run the model and pool the spans on its device (asynchronously on a GPU); returns
        the normalised vectors ``[texts, 1 + spans, dim]`` (still on the device) and a timer."""
        import torch
        import torch.nn.functional as F  # noqa: N812

        started = time.perf_counter()
        features = {k: torch.from_numpy(v).to(self.device) for k, v in inputs.items()}
        offsets, ranges = (torch.from_numpy(a).to(self.device) for a in where)
        _add(timings, "transfer", started)
        timer = _Timer(self.cuda)
        with torch.inference_mode():
            output = self.model(features)
            timer.mark()
            whole = output["sentence_embedding"].float().unsqueeze(1)  # [B, 1, D]
            if ranges.shape[1]:
                tokens = output["token_embeddings"].float()  # [B, T, D]
                weights = span_mask(offsets, ranges).float()  # [B, S, T]
                counts = weights.sum(-1, keepdim=True)  # [B, S, 1]
                parts = torch.bmm(weights, tokens) / counts.clamp(min=1.0)
                parts = torch.where(counts > 0, parts, whole)  # no token survived: the text's
                vectors = torch.cat([whole, parts], dim=1)
            else:
                vectors = whole
            vectors = F.normalize(vectors, dim=-1)
            timer.mark()
        if not self.cuda:  # on a CPU the work is done: time it now
            timer.add_to(timings)
        return vectors, timer

    def _collect(
        self,
        pending: tuple[list[int], list[int], Any, Any],
        out: list[Any],
        timings: dict[str, float],
    ) -> None:
        batch, rows, vectors, timer = pending
        started = time.perf_counter()
        host = vectors.cpu().numpy()  # waits for the device
        if self.cuda:
            timer.add_to(timings)
        for b, i in enumerate(batch):
            out[i] = host[b, : 1 + rows[b]]
        _add(timings, "collect", started)


class _Timer:
    """The model's forward pass and the pooling of one batch, timed on the device (CUDA events)
    or the host."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.marks: list[Any] = []
        self.mark()

    def mark(self) -> None:
        if self.cuda:
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            self.marks.append(time.perf_counter())

    def add_to(self, timings: dict[str, float]) -> None:
        if self.cuda:
            self.marks[-1].synchronize()
            spans = [a.elapsed_time(b) / 1000 for a, b in pairwise(self.marks)]
        else:
            spans = [b - a for a, b in pairwise(self.marks)]
        for key, seconds in zip(("model", "pool"), spans, strict=True):
            timings[key] = timings.get(key, 0.0) + seconds


def _add(timings: dict[str, float], key: str, started: float) -> None:
    timings[key] = timings.get(key, 0.0) + time.perf_counter() - started


__all__ = [
    "Precision",
    "TokenReader",
    "span_mask",
    "span_ranges",
    "splits_words_first",
    "token_batches",
    "token_counts",
    "token_starts",
]
