# Sourced by the ops/run-*.sh launchers: the interpreter and the working directory.
# PYTHON: the interpreter that has ctxpipe installed. Default: the project's .venv if there is
# one, else python3 on PATH (containers, or a machine with ctxpipe installed system-wide).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then
    PYTHON="$ROOT/.venv/bin/python"
  else
    PYTHON="$(command -v python3 || command -v python)"
  fi
fi
cd "$ROOT"  # `-A tasks.app` and beat_schedule are importable from the project root
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}"
export PYTHONUNBUFFERED=1
