"""Knobs of the read path: the models live in `ctxpipe.core.retrieval_config` (so that
`Settings` carries them, settable from the environment); this module re-exports them."""

from ctxpipe.core.retrieval_config import (
    PRESETS,
    ContextConfig,
    FindConfig,
    HierarchicalConfig,
    IntentConfig,
    RetrievalConfig,
    RetrievalPreset,
    preset_values,
    retrieval_preset,
)

__all__ = [
    "PRESETS",
    "ContextConfig",
    "FindConfig",
    "HierarchicalConfig",
    "IntentConfig",
    "RetrievalConfig",
    "RetrievalPreset",
    "preset_values",
    "retrieval_preset",
]
