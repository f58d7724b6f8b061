"""Secrets: passwords come only from the environment — compose refuses to
start without them and holds no default — and Flower always has basic auth."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from test_compose import COMPOSE_FILE, PASSWORDS, ROOT, compose_binary, compose_json


def compose_without(*names: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    env.update({k: v for k, v in PASSWORDS.items() if k not in names})
    for name in names:
        env.pop(name, None)
    return subprocess.run(
        [str(compose_binary()), "-f", str(COMPOSE_FILE), "config", "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compose_refuses_to_run_without_the_passwords() -> None:
    if (ROOT / ".env").exists():  # a developer's .env would supply them
        return
    for name in PASSWORDS:
        result = compose_without(name)
        assert result.returncode != 0
        assert f"set {name} in the environment or .env" in result.stderr, result.stderr


def test_compose_holds_no_password_of_its_own() -> None:
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    assert not re.search(r"PASSWORD:?-", text), "a default password in docker-compose.yml"
    services = compose_json(COMPOSE_FILE)["services"]
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == "pg-test-pw"
    for name, svc in services.items():
        url = svc.get("environment", {}).get("CTXPIPE_DATABASE_URL")
        if url:
            assert ":pg-test-pw@" in url, name
    flower = services["flower"]
    assert flower["environment"]["CTXPIPE_FLOWER_PASSWORD"] == "flower-test-pw"
    assert flower["command"] == ["ops/run-flower.sh"]


def test_flower_script_requires_auth_and_keeps_the_password_off_the_command_line(
    tmp_path: Path,
) -> None:
    script = ROOT / "ops" / "run-flower.sh"
    text = script.read_text(encoding="utf-8")
    assert 'export FLOWER_BASIC_AUTH="$user:$password"' in text
    assert "--basic-auth" not in text  # argv is visible in `ps`

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        base = {"PATH": os.environ["PATH"], "PYTHON": "/bin/false"}
        return subprocess.run(
            ["bash", str(script)], env={**base, **env}, capture_output=True, text=True, timeout=30
        )

    empty = run(CTXPIPE_FLOWER_PASSWORD="")
    assert empty.returncode == 2 and "needs basic auth" in empty.stderr
    public_default = run(FLOWER_ADDRESS="0.0.0.0")
    assert public_default.returncode == 2 and "password of your own" in public_default.stderr
