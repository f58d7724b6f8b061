#!/usr/bin/env bash
# The wheel as a user installs it, used from a directory with no source tree:
#   1. build the wheel; install it with the server extras into a fresh virtualenv (torch pinned
#      by constraints.txt), start a PostgreSQL, `ctxpipe db migrate`, commit a session in
#      process, index it, and `ctxpipe find` it;
#   2. install the bare wheel (the client: httpx + pydantic at their lowest allowed releases)
#      into a second virtualenv and use the client's models.
# Prints the size and import time of both installs (the README quotes them).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
SERVER="$WORK/server-venv"
CLIENT="$WORK/client-venv"
cleanup() {
  if [[ -x "$SERVER/bin/python" && -d "$WORK/pg" ]]; then
    "$SERVER/bin/python" -c "from ctxpipe.storage import embedded_pg as p; p.stop_postgres('$WORK/pg')" \
      || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
unset PYTHONPATH
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

python3 -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" "$ROOT"
WHEEL="$(ls "$WORK"/dist/ctxpipe-*.whl)"
mkdir "$WORK/run"
cp "$ROOT/examples/alice_2026-03-16_airflow.json" "$WORK/run/session.json"
cd "$WORK/run"  # nothing of the checkout is importable from here

size() { du -sm "$1/lib" | cut -f1; }
import_ms() {  # median of 5 fresh interpreters
  for _ in 1 2 3 4 5; do
    "$1/bin/python" -c "import time; t = time.perf_counter(); import $2; print(round((time.perf_counter() - t) * 1000))"
  done | sort -n | sed -n 3p
}

# --- 1. the server install
python3 -m venv "$SERVER"
EMPTY_MB="$(size "$SERVER")"  # a bare virtualenv (pip itself): not counted below
"$SERVER/bin/pip" install --quiet -c "$ROOT/constraints.txt" "$WHEEL[server]"
"$SERVER/bin/python" - "$ROOT" <<'PY'
import sys
from pathlib import Path

import ctxpipe
from ctxpipe.resources import resource_dir

root = Path(sys.argv[1]).resolve()
where = Path(ctxpipe.__file__).resolve()
assert root not in where.parents, f"ctxpipe imported from the checkout: {where}"
for name in ("sql", "prompts"):
    d = resource_dir(name)
    assert "site-packages" in d.parts and d.parent.name == "_resources", d
print(f"installed: {where.parent}")
PY
CTXPIPE_DATABASE_URL="$("$SERVER/bin/python" - "$WORK/pg" <<'PY'
import socket
import sys

from ctxpipe.storage import embedded_pg

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
print(embedded_pg.start_postgres(sys.argv[1], port))
PY
)"
export CTXPIPE_DATABASE_URL CTXPIPE_FS_ROOT="$WORK/run/fs"
CLI="$SERVER/bin/ctxpipe"
"$CLI" db migrate
"$CLI" commit --inline session.json
"$CLI" reindex
"$CLI" find "how was the Airflow DAG fixed?" -a acme -u alice --json > found.json
"$SERVER/bin/python" - <<'PY'
import json

found = json.load(open("found.json"))
hits = [h for hs in found["groups"].values() for h in hs]
assert hits, "find returned nothing"
assert any("airflow" in (h["uri"] + h["text"]).lower() for h in hits), hits[:3]
print(f"find: {len(hits)} hit(s), best {hits[0]['uri']}")
PY

# the Celery app and its beat schedule come with the wheel (`celery -A tasks.app ...`)
"$SERVER/bin/python" - <<'PY'
from tasks.app import app

app.loader.import_default_modules()
tasks = {name for name in app.tasks if name.startswith("ctxpipe.")}
scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
assert scheduled <= tasks, scheduled - tasks
assert {"ctxpipe.index.drain", "ctxpipe.maintenance.reap"} <= scheduled
print(f"celery app: {len(tasks)} tasks, {len(scheduled)} scheduled by beat")
PY

# --- 2. the client-only install, at the lowest httpx and pydantic the metadata allows
python3 -m venv "$CLIENT"
printf 'httpx==0.27.0\npydantic==2.7.0\n' > "$WORK/lowest.txt"
"$CLIENT/bin/pip" install --quiet -c "$WORK/lowest.txt" "$WHEEL"
"$CLIENT/bin/python" - <<'PY'
import importlib.util
import sys

from ctxpipe.client import CtxClient
from ctxpipe.client.models import CommitStatus
from ctxpipe.client.results import FindResult

for server_side in ("fastapi", "psycopg", "redis", "celery", "torch", "sentence_transformers"):
    assert importlib.util.find_spec(server_side) is None, f"{server_side} is installed"
status = CommitStatus.model_validate({"commit_id": "c1", "phase": "done", "finished": True})
found = FindResult.model_validate(
    {"query": "q", "groups": {"memory": [{"uri": "ctx://a/users/u/x", "level": 0, "score": 1}]}}
)
assert status.finished and found.hits[0].uri == "ctx://a/users/u/x"
with CtxClient("http://127.0.0.1:9", "ctx_key") as client:
    assert client.defaults.user_id is None
print("client-only install: ok")
PY
if "$CLIENT/bin/ctxpipe" --help > client-cli.out 2>&1; then
  echo "the server command ran on a client-only install" >&2
  exit 1
fi
grep -q "needs the server install" client-cli.out && [[ "$(wc -l < client-cli.out)" -eq 1 ]]

"$CLIENT/bin/python" -m pip list --format=freeze | grep -iE '^(httpx|pydantic)=='
echo "client-only install: $(($(size "$CLIENT") - EMPTY_MB)) MB," \
  "import ctxpipe.client $(import_ms "$CLIENT" ctxpipe.client) ms"
echo "server install: $(($(size "$SERVER") - EMPTY_MB)) MB," \
  "import ctxpipe.client $(import_ms "$SERVER" ctxpipe.client) ms," \
  "import ctxpipe.service $(import_ms "$SERVER" ctxpipe.service) ms"
echo "wheel smoke: passed"
