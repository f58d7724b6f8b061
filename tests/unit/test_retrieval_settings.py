"""`RetrievalConfig` from the environment (`CTXPIPE_RETRIEVAL__…`) and the named presets
(`CTXPIPE_RETRIEVAL_PRESET`): a value set on its own wins over the preset's."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from ctxpipe.core.config import Settings
from ctxpipe.core.retrieval_config import PRESETS, RetrievalConfig, preset_values, retrieval_preset
from ctxpipe.retrieval import RetrievalConfig as Reexported
from ctxpipe.retrieval.config import FindConfig


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CTXPIPE_RETRIEVAL"):
            monkeypatch.delenv(name)


def test_the_defaults_are_the_models_defaults() -> None:
    s = Settings()
    assert s.retrieval_preset == "default"
    assert s.retrieval == RetrievalConfig()
    assert Reexported is RetrievalConfig


def test_a_nested_value_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPIPE_RETRIEVAL__FIND__TOP_K", "20")
    monkeypatch.setenv("CTXPIPE_RETRIEVAL__HIERARCHICAL__ALPHA", "0.5")
    monkeypatch.setenv("CTXPIPE_RETRIEVAL__FIND__STORED_UNITS", "false")
    s = Settings()
    assert s.retrieval.find.top_k == 20
    assert s.retrieval.find.stored_units is False
    assert s.retrieval.hierarchical.alpha == 0.5
    assert s.retrieval.find.candidates == FindConfig().candidates  # the rest: defaults


def test_a_bad_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPIPE_RETRIEVAL__FIND__TOP_K", "0")
    with pytest.raises(ValidationError, match="top_k"):
        Settings()


@pytest.mark.parametrize("name", ["fast", "thorough"])
def test_a_preset_from_the_environment(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("CTXPIPE_RETRIEVAL_PRESET", name)
    s = Settings()
    assert s.retrieval == retrieval_preset(name)
    for section, values in PRESETS[name].items():
        for field, value in values.items():
            assert getattr(getattr(s.retrieval, section), field) == value


def test_the_presets_order_the_candidates() -> None:
    fast, default, thorough = (retrieval_preset(n) for n in ("fast", "default", "thorough"))
    assert fast.find.candidates < default.find.candidates < thorough.find.candidates
    assert fast.find.dense_rows < default.find.dense_rows < thorough.find.dense_rows
    assert fast.hierarchical.pool < default.hierarchical.pool < thorough.hierarchical.pool
    assert fast.find.stored_units


def test_a_value_set_on_its_own_wins_over_the_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPIPE_RETRIEVAL_PRESET", "fast")
    monkeypatch.setenv("CTXPIPE_RETRIEVAL__FIND__CANDIDATES", "30")
    s = Settings()
    assert s.retrieval.find.candidates == 30
    assert s.retrieval.find.dense_rows == PRESETS["fast"]["find"]["dense_rows"]


def test_a_preset_as_an_argument_and_a_ready_config() -> None:
    assert Settings(retrieval_preset="thorough").retrieval == retrieval_preset("thorough")
    ready = RetrievalConfig(find=FindConfig(top_k=3))
    assert Settings(retrieval_preset="fast", retrieval=ready).retrieval.find.top_k == 3


def test_an_unknown_preset_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPIPE_RETRIEVAL_PRESET", "fastest")
    with pytest.raises(ValidationError, match="retrieval_preset"):
        Settings()
    with pytest.raises(ValueError, match="fastest"):
        preset_values("fastest")


def test_the_read_path_takes_the_settings_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace
    from unittest.mock import MagicMock

    from ctxpipe.retrieval import read_path
    from ctxpipe.retrieval.tokens import WhitespaceTokenCounter

    monkeypatch.setattr(read_path, "counter_for_model", lambda _name: WhitespaceTokenCounter())
    monkeypatch.setenv("CTXPIPE_RETRIEVAL_PRESET", "thorough")
    monkeypatch.setenv("CTXPIPE_RETRIEVAL__FIND__TOP_K", "7")
    settings = Settings()
    rt = SimpleNamespace(
        settings=settings,
        db=MagicMock(),
        embedder=MagicMock(model_name="m"),
        fs=MagicMock(),
        llm=MagicMock(),
        relations=MagicMock(),
    )
    rp = read_path.ReadPath.from_runtime(rt)  # type: ignore[arg-type]
    assert rp.config is settings.retrieval
    assert rp.finder.config.top_k == 7
    assert rp.finder.config.candidates == PRESETS["thorough"]["find"]["candidates"]
    given = RetrievalConfig(find=FindConfig(top_k=2))
    assert read_path.ReadPath.from_runtime(rt, given).finder.config.top_k == 2  # type: ignore[arg-type]


def test_a_child_process_rebuilds_the_retrieval_settings_from_the_stacks_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dev stack starts its workers with the settings as CTXPIPE_* variables: a model
    nested two deep (retrieval.find) travels as its JSON and comes back equal."""
    from ctxpipe.devstack.env import settings_env

    settings = Settings(retrieval_preset="thorough")
    settings.retrieval.find.top_k = 17
    for key in [k for k in os.environ if k.startswith("CTXPIPE_")]:
        monkeypatch.delenv(key)
    for key, value in settings_env(settings).items():
        monkeypatch.setenv(key, value)
    again = Settings()
    assert again.retrieval == settings.retrieval
    assert (again.retrieval.find.top_k, again.retrieval_preset) == (17, "thorough")
