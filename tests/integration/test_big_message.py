"""A 1 MB message commits (it used to refuse the whole session): the archive keeps it whole,
or above the keep limit a bounded excerpt that says it was cut and how long the message was;
the archive summary and the extractors read a bounded window of it; the result warns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxpipe.core.config import Settings
from ctxpipe.core.session import LimitsConfig, Message, RequestContext
from ctxpipe.providers.base import LLMUsage
from ctxpipe.providers.rules import RulesLLM
from ctxpipe.runtime import Runtime
from ctxpipe.service import ContextEngineService

MB = 1_000_000
LINE = "2026-11-26T10:00:00 worker-7 INFO processed batch 4411 in 32 ms, queue depth 12\n"


class ReadingLLM:
    """The offline rules provider, noting the longest message each prompt was given."""

    name = "rules"

    def __init__(self) -> None:
        self._inner = RulesLLM()
        self.longest: dict[str, int] = {}

    def _note(self, prompt_id: str, variables: dict[str, Any]) -> None:
        sizes = [len(m["content"]) for m in variables.get("messages", [])]
        self.longest[prompt_id] = max([self.longest.get(prompt_id, 0), *sizes])

    async def complete_json(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: Any,
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> Any:
        self._note(prompt_id, variables)
        return await self._inner.complete_json(prompt_id, variables, schema, ctx, usage)

    def complete_json_sync(
        self,
        prompt_id: str,
        variables: dict[str, Any],
        schema: Any,
        ctx: RequestContext | None = None,
        usage: LLMUsage | None = None,
    ) -> Any:
        self._note(prompt_id, variables)
        return self._inner.complete_json_sync(prompt_id, variables, schema, ctx, usage)


def session(big: str) -> list[Message]:
    return [
        Message(id="m1", role="user", content="I'm a data engineer in Lisbon. Here is the log:"),
        Message(id="m2", role="user", content=big),
        Message(id="m3", role="assistant", content="The batches all finish in about 32 ms."),
        Message(id="m4", role="user", content="Thanks, I prefer short answers like that."),
    ]


def commit(
    make_settings: Callable[..., Settings], tmp_path: Path, big: str, **limits: int
) -> tuple[Any, str, ReadingLLM]:
    settings = make_settings(redis=False, limits=LimitsConfig(**limits))
    llm = ReadingLLM()
    svc = ContextEngineService(Runtime(settings, llm=llm))  # type: ignore[arg-type]
    try:
        ctx = RequestContext(account_id="acme", user_id="ann", session_id="big1")
        view = svc.wait_commit(svc.commit_session(ctx, session(big)))
        assert view.result is not None, view.error
        uri = view.result.archive.archive_uri  # type: ignore[union-attr]
        assert uri is not None
        archived = svc.runtime.fs.read_node(uri).content
    finally:
        svc.close()
    return view.result, archived, llm


def test_a_1_mb_message_is_kept_whole_and_read_in_a_bounded_window(
    make_settings: Callable[..., Settings], clean_db: str, tmp_path: Path
) -> None:
    big = (LINE * (MB // len(LINE) + 1))[:MB]
    result, archived, llm = commit(make_settings, tmp_path, big)
    assert result.status.value == "success"
    assert big in archived  # the archive keeps the whole message
    assert "message 'm2' has 1,000,000 characters: extraction read its first 100,000" in " ".join(
        result.warnings
    )
    # the session's one call (summary and extractors) read the message's bounded window
    assert llm.longest["extraction.session"] == 100_000
    assert all(n <= 100_000 for n in llm.longest.values()), llm.longest
    assert result.stats.nodes_created >= 1  # the short turns around it still make memories


def test_above_the_keep_limit_the_archive_keeps_a_marked_excerpt(
    make_settings: Callable[..., Settings], clean_db: str, tmp_path: Path
) -> None:
    big = (LINE * (MB // len(LINE) + 1))[:MB]
    result, archived, llm = commit(make_settings, tmp_path, big, max_message_keep_chars=300_000)
    assert result.status.value == "success"
    assert big[:300_000] in archived and big[:300_001] not in archived
    assert "[ctxpipe: message cut: the first 300,000 of its 1,000,000 characters are kept]" in (
        archived
    )
    warned = " ".join(result.warnings)
    assert "'m2' had 1,000,000 characters: the archive keeps an excerpt" in warned
    assert all(n <= 100_000 for n in llm.longest.values())
