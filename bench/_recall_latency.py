"""The read path's latency in bench/locomo_recall.py: every `find` timed beside the bare query
of a plain vector store (embed the question, exact top-10 by cosine over the owner's chunks),
question by question in alternating order; build_context's builds; the variants' finds; and
the torch threads the questions are asked on."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ctxpipe.retrieval.find.hybrid_finder import HybridFinder
    from ctxpipe.retrieval.models import FindFilters, FindResult
    from ctxpipe.retrieval.read_path import ReadPath

FIND_MS: list[float] = []  # wall time of every ctxpipe find call
FIND_MS_QUERY_TIME: list[float] = []  # the same questions, unit vectors encoded at query time
FIND_PHASES: list[dict[str, float]] = []  # find's own timings_ms per call
BARE_MS: list[float] = []  # the bare query: embed the question + exact pgvector top-10
CONTEXT_MS: list[float] = []  # build_context's own total time per build
VARIANT_MS: dict[str, list[float]] = {}  # wall time of each variant's first find per question
_QUERY_TIME: dict[int, HybridFinder] = {}


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to `n` inside (0: left as they are)."""
    if n <= 0:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def pct(values: Sequence[float], q: int) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def pair_ratios(find_ms: Sequence[float], bare_ms: Sequence[float]) -> dict[str, float]:
    """find ÷ the bare query question by question (the two are timed back to back, in
    alternating order, for each question): the median and the 95th percentile of those
    ratios. Steadier than the ratio of the two p95s, which moves with whichever tail is
    heavier in a run."""
    ratios = [f / b for f, b in zip(find_ms, bare_ms, strict=True) if b > 0]
    if not ratios:
        return {}
    return {f"p{q}": round(float(np.percentile(ratios, q)), 2) for q in (50, 95)}


def timed_find(
    read: ReadPath, question: str, filters: FindFilters, query_time_units: bool = False
) -> FindResult:
    """find's 10 hits for `question` (it embeds the question itself), timed with the bare
    query right before or right after it, in turn; with `query_time_units` also timed with
    the unit vectors encoded at query time, in turn before or after."""
    if query_time_units and len(FIND_MS) % 2:
        _time_query_time_units(read, question, filters)
    bare_first = len(FIND_MS) % 2 == 0
    if bare_first:
        _time_bare(read, question, filters)
    t0 = time.perf_counter()
    found = read.finder.find(question, filters, 10)
    FIND_MS.append((time.perf_counter() - t0) * 1000)
    FIND_PHASES.append(found.timings_ms)
    if not bare_first:
        _time_bare(read, question, filters)
    if query_time_units and len(FIND_MS_QUERY_TIME) < len(FIND_MS):
        _time_query_time_units(read, question, filters)
    return found


def _time_bare(read: ReadPath, question: str, filters: FindFilters) -> None:
    t0 = time.perf_counter()
    qvec = read.finder.embed(question)
    read.finder.exact_neighbours(qvec, filters, 10)
    BARE_MS.append((time.perf_counter() - t0) * 1000)


def _time_query_time_units(read: ReadPath, question: str, filters: FindFilters) -> None:
    """Time `find` with the unit vectors encoded at query time (its own LRU, warm across the
    questions as in a long-running process), recording no recalls."""
    from ctxpipe.retrieval.find.hybrid_finder import HybridFinder

    finder = _QUERY_TIME.get(id(read))
    if finder is None:
        base = read.finder
        cfg = base.config.model_copy(update={"stored_units": False, "record_recalls": False})
        finder = HybridFinder(base.db, base.embedder, read.counter, schema=base.schema, config=cfg)
        _QUERY_TIME[id(read)] = finder
    t0 = time.perf_counter()
    finder.find(question, filters, 10)
    FIND_MS_QUERY_TIME.append((time.perf_counter() - t0) * 1000)


def latency_meta() -> dict[str, Any]:
    """The latency figures of the run, for its JSON."""
    return {
        "find_p50_ms": pct(FIND_MS, 50),
        "find_p95_ms": pct(FIND_MS, 95),
        "bare_p50_ms": pct(BARE_MS, 50),
        "bare_p95_ms": pct(BARE_MS, 95),
        "find_over_bare_per_question": pair_ratios(FIND_MS, BARE_MS),
        "context_p50_ms": pct(CONTEXT_MS, 50),
        "context_p95_ms": pct(CONTEXT_MS, 95),
        "variant_find_ms": {
            k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in VARIANT_MS.items()
        },
    }


def print_latency(meta: dict[str, Any]) -> None:
    print(
        f"\nctxpipe find latency (question embedding included): "
        f"p50 {meta['find_p50_ms']} ms, p95 {meta['find_p95_ms']} ms"
    )
    print(
        f"build_context latency (retrieval included, 3 budgets per question): "
        f"p50 {meta['context_p50_ms']} ms, p95 {meta['context_p95_ms']} ms"
    )
    if BARE_MS:
        print(
            f"bare query (embed + exact pgvector top-10 over the owner's chunks), same run: "
            f"p50 {meta['bare_p50_ms']} ms, p95 {meta['bare_p95_ms']} ms -> find / bare "
            f"p50 {meta['find_p50_ms'] / meta['bare_p50_ms']:.2f}, "
            f"p95 {meta['find_p95_ms'] / meta['bare_p95_ms']:.2f} (target p95 <= 1.5); "
            f"question by question: median {meta['find_over_bare_per_question']['p50']}, "
            f"p95 {meta['find_over_bare_per_question']['p95']}"
        )
    if FIND_PHASES:
        phases = sorted({k for t in FIND_PHASES for k in t})
        print("  find phases p50/p95 ms: " + ", ".join(
            f"{k} {np.percentile([t.get(k, 0.0) for t in FIND_PHASES], 50):.1f}/"
            f"{np.percentile([t.get(k, 0.0) for t in FIND_PHASES], 95):.1f}"
            for k in phases))  # fmt: skip
    for system, times in VARIANT_MS.items():
        print(f"  {system}: find p50 {pct(times, 50)} ms, p95 {pct(times, 95)} ms")
    if FIND_MS_QUERY_TIME:
        print(
            f"  with unit vectors encoded at query time: "
            f"p50 {pct(FIND_MS_QUERY_TIME, 50)} ms, p95 {pct(FIND_MS_QUERY_TIME, 95)} ms"
        )
