"""The environment every dev-stack process gets: the resolved `Settings` as `CTXPIPE_*` vars.

Writing the *resolved* values (absolute paths) means a relative `var/` in the caller's shell
resolves to the same directories in every worker, whatever its working directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

from ctxpipe.core.config import Settings

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", ""})
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def resolve(settings: Settings) -> Settings:
    """A copy with `var_dir` and `fs_root` made absolute (against the current directory)."""
    return settings.model_copy(
        update={"var_dir": settings.var_dir.absolute(), "fs_root": settings.fs_root.absolute()}
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value.absolute())
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, BaseModel):  # a model nested two deep (retrieval.find): its JSON
        return value.model_dump_json()
    return json.dumps(value, default=str)


def settings_env(settings: Settings) -> dict[str, str]:
    """Every Settings field as `CTXPIPE_<NAME>` (nested models as `CTXPIPE_<NAME>__<SUB>`)."""
    out: dict[str, str] = {}
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, BaseModel):
            for sub in type(value).model_fields:
                text = _text(getattr(value, sub))
                if text is not None:
                    out[f"CTXPIPE_{name}__{sub}".upper()] = text
            continue
        text = _text(value)
        if text is not None:
            out[f"CTXPIPE_{name}".upper()] = text
    return out


def project_root() -> Path | None:
    """The directory holding the `ctxpipe` and `tasks` packages (source tree or site-packages)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "tasks" / "app.py").is_file() else None


def child_env(settings: Settings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's env) without stray CTXPIPE_* vars, plus the settings."""
    env = {k: v for k, v in (os.environ if base is None else base).items()}
    for key in [k for k in env if k.startswith("CTXPIPE_")]:
        del env[key]
    env.update(settings_env(settings))
    env.update(OFFLINE)
    env["PYTHONUNBUFFERED"] = "1"  # logs reach the log file as they happen
    root = project_root()
    if root is not None:  # `-A tasks.app` and `beat_schedule` importable from any cwd
        parts = [str(root), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    return env


def host_port(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or default_port


def is_local(url: str) -> bool:
    return (urlsplit(url).hostname or "") in LOCAL_HOSTS


__all__ = ["child_env", "host_port", "is_local", "project_root", "resolve", "settings_env"]
