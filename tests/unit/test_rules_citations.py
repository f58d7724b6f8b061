"""A memory line holds what it cites: every line of the user's memories cites the one message
its words come from, and — by the grounding rule of bench/_grounding.py — its text carries that
message's content (the message's words, or a whole sentence of it)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _grounding import TurnContent, content_words, grounded_turns  # noqa: E402

from ctxpipe.core.llm_schemas import ExtractionOutput  # noqa: E402
from ctxpipe.core.session import SessionInput, message_vars  # noqa: E402
from ctxpipe.providers.rules import RulesLLM  # noqa: E402
from ctxpipe.providers.rules.lines import parse_lines  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
PROMPTS = ("extraction.profile", "extraction.preferences", "extraction.entity_event")


def cited_lines(name: str) -> tuple[list[tuple[str, list[str]]], dict[str, Any]]:
    session = SessionInput.model_validate(json.loads((FIXTURES / f"{name}.json").read_text()))
    own = [m for m in session.messages if not m.injected]
    variables = {"messages": message_vars(own), "user_id": session.user_id}
    out: list[tuple[str, list[str]]] = []
    for prompt in PROMPTS:
        for mem in RulesLLM().complete_json_sync(prompt, variables, ExtractionOutput).memories:
            for line in parse_lines(mem.content):
                assert line.refs, f"a line that cites nothing: {line.render()!r}"
                # what the line returns: its statement and the user's own words it quotes
                out.append((f"{line.text} {line.evidence}".strip(), line.refs))
    return out, {m.id: m for m in own}


@pytest.mark.parametrize("name", NAMES)
def test_every_line_cites_one_user_message_and_is_made_of_its_words(name: str) -> None:
    lines, messages = cited_lines(name)
    assert lines
    for text, refs in lines:
        assert len(refs) == 1 and messages[refs[0]].role == "user", (text, refs)
        said = content_words(messages[refs[0]].content)
        # the line's own words (names, the absolute dates it adds aside) come from the turn
        own = content_words(re.sub(r"\([^()]*\d{4}\)", "", text)) - content_words("user others")
        assert len(own - said) * 4 <= len(own), (text, sorted(own - said))


def test_most_cited_turns_are_held_by_the_line_that_cites_them() -> None:
    cited = held = 0
    for name in NAMES:
        lines, messages = cited_lines(name)
        turns = {i: TurnContent.of(m.content) for i, m in messages.items()}
        for text, refs in lines:
            cited += len(refs)
            held += len(grounded_turns(text, refs, turns))
    assert held / cited >= 0.9, (held, cited)
