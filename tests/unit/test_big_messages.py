"""A long message never refuses a session: it is kept whole up to the keep limit, as a marked
excerpt with its original length above it, and the pipeline reads a bounded window of it."""

from __future__ import annotations

import time

import pytest

from ctxpipe.commit.big_messages import admit, excerpt_marker, reading_window, warnings
from ctxpipe.commit.payloads import CommitRequest
from ctxpipe.core.session import InputLimitError, LimitsConfig, Message, RequestContext

CTX = RequestContext(account_id="acme", user_id="ann", session_id="s1")


def req(*contents: str) -> CommitRequest:
    return CommitRequest(
        commit_id="c1",
        ctx=CTX,
        messages=[Message(id=f"m{i}", role="user", content=c) for i, c in enumerate(contents)],
    )


def test_a_message_of_348469_characters_is_accepted_whole() -> None:
    text = "pasted log line\n" * (348_469 // 16) + "x" * (348_469 % 16)
    admitted = admit(req("hi", text), LimitsConfig())
    assert admitted.messages[1].content == text and admitted.messages[1].original_chars is None
    (warning,) = warnings(admitted.messages, LimitsConfig())
    assert "'m1' has 348,469 characters: extraction read its first 100,000" in warning


def test_above_the_keep_limit_the_message_is_a_marked_excerpt_with_its_length() -> None:
    limits = LimitsConfig(max_message_keep_chars=1_000)
    admitted = admit(req("a" * 5_000), limits)
    m = admitted.messages[0]
    assert m.original_chars == 5_000
    assert m.content == "a" * 1_000 + excerpt_marker(1_000, 5_000)
    assert "the first 1,000 of its 5,000 characters are kept" in m.content
    assert any("had 5,000 characters: the archive keeps an excerpt" in w for w in warnings(
        admitted.messages, limits))  # fmt: skip
    assert admit(admitted, limits) == admitted  # an excerpt is not cut again


def test_the_pipeline_reads_a_bounded_window_of_each_message() -> None:
    messages = req("short", "b" * 300).messages
    window = reading_window(messages, 100)
    assert window[0] is messages[0] and window[1].content == "b" * 100
    assert window[1].id == "m1" and messages[1].content == "b" * 300  # the kept one is whole


def test_the_session_total_counts_each_message_up_to_its_window() -> None:
    limits = LimitsConfig(max_message_chars=100, max_session_chars=250)
    admit(req("c" * 10_000, "d" * 10_000), limits)  # 100 + 100 read: accepted
    with pytest.raises(InputLimitError, match="MAX_SESSION_CHARS"):
        admit(req("c" * 100, "d" * 100, "e" * 100), limits)


def test_cutting_and_windowing_take_linear_time() -> None:
    limits = LimitsConfig()

    def cost(n: int) -> float:
        best = float("inf")
        for _ in range(3):
            r = req("word " * (n // 5))
            t0 = time.perf_counter()
            warnings(reading_window(admit(r, limits).messages, limits.max_message_chars), limits)
            best = min(best, time.perf_counter() - t0)
        return best

    # both sizes over the kept bound (2,000,000), so both take the cutting path: a message
    # four times longer costs no more than linear (the excerpt is bounded: ~1x), timed above
    # a millisecond's floor (a 2,000,000-character message is not cut: ~30 us)
    assert cost(16_000_000) < 1.0
    assert cost(16_000_000) / max(cost(4_000_000), 1e-3) < 10
