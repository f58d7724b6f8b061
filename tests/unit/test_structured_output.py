"""Structured output from local models: each reply of the corpus
(tests/data/malformed_llm_outputs.yaml) is taken as it stands, repaired into an object of its
schema, or refused (and so retried by the provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from ctxpipe.core.llm_schemas import DedupDecisionOutput, ExtractionOutput, MergeOutput
from ctxpipe.core.models import ArchiveSummary
from ctxpipe.providers.structured_output import OutputRefused, parse_reply

CORPUS = Path(__file__).resolve().parents[1] / "data" / "malformed_llm_outputs.yaml"
SCHEMAS: dict[str, type[BaseModel]] = {
    s.__name__: s for s in (ArchiveSummary, ExtractionOutput, MergeOutput, DedupDecisionOutput)
}
CASES: list[dict[str, Any]] = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))


def test_corpus_is_broad() -> None:
    outcomes = [c["expect"] for c in CASES]
    assert len(CASES) >= 20 and len({c["id"] for c in CASES}) == len(CASES)
    assert outcomes.count("repaired") >= 12 and outcomes.count("refused") >= 8
    assert {c["schema"] for c in CASES} == set(SCHEMAS)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reply(case: dict[str, Any]) -> None:
    schema = SCHEMAS[case["schema"]]
    if case["expect"] == "refused":
        with pytest.raises(OutputRefused, match=case["reason"]):
            parse_reply(case["reply"], schema)
        return
    parsed = parse_reply(case["reply"], schema)
    assert parsed.repaired is (case["expect"] == "repaired")
    assert isinstance(parsed.value, schema)
    # `value` names the fields that matter; the others keep their defaults or any value
    expected = schema.model_validate(case["value"]).model_dump(include=set(case["value"]))
    assert parsed.value.model_dump(include=set(case["value"])) == expected
