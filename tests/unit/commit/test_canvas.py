"""Which extractors of a commit get a task of their own (a chord) on the workers."""

from __future__ import annotations

from conftest import SESSION_1, request

from ctxpipe.commit.canvas import extractor_tasks
from ctxpipe.core.config import CommitConfig, Settings
from ctxpipe.core.enums import MemoryCategory
from ctxpipe.core.models import CommitOptions
from ctxpipe.extraction.extractors import EXTRACTOR_NAMES


def settings(fanout: str = "auto", **kw: object) -> Settings:
    return Settings(commit=CommitConfig(extract_fanout=fanout), **kw)  # type: ignore[arg-type]


def test_the_rules_llm_never_pays_for_a_chord() -> None:
    req = request(SESSION_1)
    assert extractor_tasks(req, settings()) == []
    assert extractor_tasks(None, settings()) == []
    assert extractor_tasks(req, settings("tasks")) == list(EXTRACTOR_NAMES)


def test_a_slow_llm_gets_a_chord_of_the_extractors_with_work() -> None:
    slow = settings(llm_simulated_latency_s=1.0)
    assert extractor_tasks(request(SESSION_1), slow) == list(EXTRACTOR_NAMES)
    assert extractor_tasks(None, slow) == list(EXTRACTOR_NAMES)  # a re-drive: all of them
    assert extractor_tasks(request(SESSION_1), settings("inline", llm_provider="openai")) == []
    only = CommitOptions(categories_filter=[MemoryCategory.PROFILE, MemoryCategory.CASES])
    assert extractor_tasks(request(SESSION_1, options=only), slow) == ["profile", "procedure"]


def test_no_chord_for_fewer_than_two_extractors_with_work_nor_for_a_dry_run() -> None:
    slow = settings("tasks")
    one = CommitOptions(categories_filter=[MemoryCategory.PROFILE])
    assert extractor_tasks(request(SESSION_1, options=one), slow) == []
    assert extractor_tasks(request(SESSION_1, options=CommitOptions(dry_run=True)), slow) == []
    injected = request(SESSION_1)
    injected = injected.model_copy(
        update={"messages": [m.model_copy(update={"injected": True}) for m in injected.messages]}
    )
    assert extractor_tasks(injected, slow) == []
