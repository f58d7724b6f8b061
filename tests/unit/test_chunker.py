"""DocumentChunker: token-exact splitting with the real all-MiniLM-L6-v2 tokenizer, stable ids,
and the source message ids every chunk keeps.

The tokenizer is the model's own `tokenizer.json`, read without torch (that it counts as the
loaded model does is checked in tests/integration/test_embedder.py)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from ctxpipe.core.config import ChunkingConfig
from ctxpipe.core.enums import ContextType
from ctxpipe.core.models import ChunkRecord, ContextNode
from ctxpipe.index.chunker import DocumentChunker, cited_ids, narrow_refs
from ctxpipe.providers.embedder import PACKAGED_MODEL, SentenceTransformerEmbedder
from ctxpipe.retrieval.tokens import counter_for_model

ARCHIVE = "ctx://acme/sessions/s1/archives/3"
MEMORY = "ctx://acme/users/alice/memories/cases/deploy-fix"


class ModelTokens:
    """The packaged model's tokenizer and sequence limit, as the chunker reads them from the
    embedder, without loading the model."""

    def __init__(self, model: str) -> None:
        self._counter = counter_for_model(model)
        self.max_seq_length = SentenceTransformerEmbedder(model).max_seq_length  # from its config

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)


class OffsetTokens(ModelTokens):
    """The same tokenizer as the embedder offers it to the chunker: token offsets and counts
    of many texts in one batched call (the boundaries are read off the offsets)."""

    word_additive = True  # BERT's pre-tokenizer splits at spaces and punctuation

    def token_starts(self, texts: list[str]) -> list[list[int]]:
        encodings = self._counter._tok.encode_batch(texts, add_special_tokens=False)
        return [sorted(a for a, _ in e.offsets) for e in encodings]

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count_tokens(t) for t in texts]


@pytest.fixture(scope="module", params=["counted", "offsets"])
def emb(request: pytest.FixtureRequest) -> ModelTokens:
    """Every test runs with both ways of measuring a span."""
    return (OffsetTokens if request.param == "offsets" else ModelTokens)(PACKAGED_MODEL)


@pytest.fixture(scope="module")
def chunker(emb: ModelTokens) -> DocumentChunker:
    return DocumentChunker(emb, ChunkingConfig(chunk_tokens=64, chunk_overlap_tokens=8))


def prose(n: int, seed: str = "deploy") -> str:
    return " ".join(f"The {seed} step {i} restarts the worker pool." for i in range(n))


def archive(messages: list[tuple[str, str]]) -> ContextNode:
    return ContextNode(
        uri=ARCHIVE,
        parent_uri="ctx://acme/sessions/s1/archives",
        context_type=ContextType.SESSION,
        category="archive",
        abstract="Alice fixed the deploy.",
        overview="## Key topics\n- deploy",
        content="\n".join(f"[{mid}] user: {text}" for mid, text in messages),
        source_refs=[f"s1:{mid}" for mid, _ in messages],
        metadata={"message_ids": [mid for mid, _ in messages]},
    )


def test_levels_ids_and_token_limits(chunker, emb):  # type: ignore[no-untyped-def]
    node = ContextNode(
        uri=MEMORY,
        abstract="Deploy fix.",
        overview="- restart [m2]",
        content=prose(40),
        source_refs=["s1:m2"],
    )
    chunks = chunker.chunk_for_node(node)
    levels = [c.level for c in chunks]
    assert levels.count(0) == 1 and levels.count(1) == 1 and levels.count(2) > 5
    for c in chunks:
        assert c.chunk_id == ChunkRecord.make_id(MEMORY, c.level, c.chunk_index)
        assert emb.count_tokens(c.text_content) <= 64
        assert c.metadata["tokens"] == emb.count_tokens(c.text_content)
    l2 = [c for c in chunks if c.level == 2]
    assert [c.chunk_index for c in l2] == list(range(len(l2)))
    # consecutive chunks overlap (the splitter's token overlap)
    assert any(a.text_content.split()[-1] in b.text_content for a, b in pairwise(l2))
    assert chunker.chunk_for_node(node) == chunks  # deterministic


def test_chunk_size_is_capped_by_the_model_limit(emb):  # type: ignore[no-untyped-def]
    big = DocumentChunker(emb, ChunkingConfig(chunk_tokens=5000, chunk_overlap_tokens=32))
    assert big.model_limit == emb.max_seq_length - 2 == 254
    assert big.chunk_tokens == 254
    node = ContextNode(uri=MEMORY, abstract=prose(60), content=prose(200, "rollback"))
    chunks = big.chunk_for_node(node)
    assert all(emb.count_tokens(c.text_content) <= 254 for c in chunks)
    # an L0 too long for the model is split, never silently truncated
    l0 = [c for c in chunks if c.level == 0]
    assert len(l0) > 1
    steps = {int(w) for c in l0 for w in c.text_content.split() if w.isdigit()}
    assert steps == set(range(60))  # every sentence kept (chunks overlap a little)


def test_text_without_spaces_still_fits(chunker, emb):  # type: ignore[no-untyped-def]
    cjk = "部署步骤重启工作池并检查日志" * 40
    node = ContextNode(uri=MEMORY, abstract="部署", content=cjk + "\n" + "x" * 3000)
    chunks = chunker.chunk_for_node(node)
    assert all(emb.count_tokens(c.text_content) <= 64 for c in chunks)
    assert "".join(c.text_content for c in chunks if c.level == 2).count("部署") >= 40


def test_non_additive_tokenizer_is_cut_exactly() -> None:
    class Superadditive:
        """Counts more tokens for a text than for its pieces (like some BPE merges)."""

        max_seq_length = 40

        def count_tokens(self, text: str) -> int:
            words = len(text.split())
            return words + words // 4

    ch = DocumentChunker(
        Superadditive(), ChunkingConfig(chunk_tokens=30, chunk_overlap_tokens=0), special_tokens=2
    )
    node = ContextNode(uri=MEMORY, abstract="a", content=" ".join(f"w{i}" for i in range(500)))
    chunks = [c for c in ch.chunk_for_node(node) if c.level == 2]
    assert all(Superadditive().count_tokens(c.text_content) <= 30 for c in chunks)
    assert " ".join(c.text_content for c in chunks).split() == [f"w{i}" for i in range(500)]


def test_empty_levels_make_no_chunks(chunker):  # type: ignore[no-untyped-def]
    only_l0 = chunker.chunk_for_node(ContextNode(uri=MEMORY, abstract="Just a title."))
    assert [(c.level, c.chunk_index) for c in only_l0] == [(0, 0)]
    assert chunker.chunk_for_node(ContextNode(uri=MEMORY, abstract="  ", overview="x")) == [
        c for c in chunker.chunk_for_node(ContextNode(uri=MEMORY, overview="x"))
    ]


# ------------------------------------------------------------------ source message ids
def test_archive_chunks_cite_the_messages_they_cover(chunker, emb):  # type: ignore[no-untyped-def]
    msgs = [
        ("m1", "Hi, I need help with the deploy."),
        ("m2", "Sure, what fails?"),
        ("m3", prose(25, "long")),  # longer than one chunk: split across several
        ("m4", "Line one of a message\nthat continues on a second line."),
        ("m5", "Thanks, that fixed it."),
    ]
    node = archive(msgs)
    chunks = chunker.chunk_for_node(node)
    l2 = [c for c in chunks if c.level == 2]
    for c in l2:
        assert c.source_refs, c.text_content
        expected = {f"s1:{mid}" for mid, text in msgs if f"[{mid}]" in c.text_content}
        assert expected <= set(c.source_refs)  # every message line inside is cited
        assert all(r.startswith("s1:m") for r in c.source_refs)
    spans_m3 = [c for c in l2 if "s1:m3" in c.source_refs]
    assert len(spans_m3) >= 3  # a long message: each of its pieces cites it
    continuation = [c for c in l2 if "second line" in c.text_content]
    assert continuation and all("s1:m4" in c.source_refs for c in continuation)
    assert {r for c in l2 for r in c.source_refs} == set(node.source_refs)
    l0 = next(c for c in chunks if c.level == 0)
    assert l0.source_refs == node.source_refs  # the summary covers the whole session


def test_archive_ids_are_qualified_even_without_source_refs(chunker):  # type: ignore[no-untyped-def]
    node = archive([("a1", "hello"), ("a2", "world")]).model_copy(update={"source_refs": []})
    l2 = [c for c in chunker.chunk_for_node(node) if c.level == 2]
    assert l2[0].source_refs == ["s1:a1", "s1:a2"]


def test_memory_chunks_narrow_refs_to_what_they_cite(chunker):  # type: ignore[no-untyped-def]
    content = "\n\n".join(
        [
            f"Problem [m1]: {prose(6, 'oom')}",
            f"Rejected attempt [m3]: {prose(6, 'swap')}",
            f"Solution [m4, m5]: {prose(6, 'batch')}",
            "Outcome: it works now.",
        ]
    )
    node = ContextNode(
        uri=MEMORY,
        abstract="OOM fixed by smaller batches.",
        overview="- problem [m1]\n- solution [m4]",
        content=content,
        source_refs=["s1:m1", "s1:m3", "s1:m4", "s1:m5", "s2:m4"],
    )
    chunks = chunker.chunk_for_node(node)
    by_text = {c.text_content.split(":")[0]: c for c in chunks if c.level == 2}
    assert by_text["Problem [m1]"].source_refs == ["s1:m1"]
    assert by_text["Solution [m4, m5]"].source_refs == ["s1:m4", "s1:m5", "s2:m4"]
    l0 = next(c for c in chunks if c.level == 0)
    assert l0.source_refs == node.source_refs  # cites nothing: every ref
    l1 = next(c for c in chunks if c.level == 1)
    assert l1.source_refs == ["s1:m1", "s1:m4", "s2:m4"]


def test_citation_helpers() -> None:
    assert cited_ids("x [m1] y [m2, m3] z [s9:m4] [ ]") == {"m1", "m2", "m3", "s9:m4"}
    refs = ["s1:m1", "s2:m1", "s9:m4", "s1:m7"]
    assert narrow_refs(refs, "only [m1]") == ["s1:m1", "s2:m1"]
    assert narrow_refs(refs, "qualified [s9:m4]") == ["s9:m4"]
    assert narrow_refs(refs, "nothing cited") == refs
    assert narrow_refs(refs, "unknown [m99]") == refs  # a citation we cannot map: keep all
    assert narrow_refs([], "[m1]") == []
