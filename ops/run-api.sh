#!/usr/bin/env bash
# Start the HTTP API (`ctxpipe serve`: uvicorn over FastAPI), in the foreground.
#
#   ops/run-api.sh [extra serve options…]
#
# Address: CTXPIPE_API_HOST (127.0.0.1) / CTXPIPE_API_PORT (8080); worker processes:
# CTXPIPE_API_WORKERS (1). With more than one worker, /metrics aggregates the latency histogram
# over all of them through PROMETHEUS_MULTIPROC_DIR (a fresh directory per start).
set -euo pipefail
source "$(dirname "$0")/_common.sh"

if [[ "${CTXPIPE_API_WORKERS:-1}" -gt 1 && -z "${PROMETHEUS_MULTIPROC_DIR:-}" ]]; then
  PROMETHEUS_MULTIPROC_DIR="$(mktemp -d -t ctxpipe-api-metrics.XXXXXX)"
  export PROMETHEUS_MULTIPROC_DIR
fi
exec "$PYTHON" -m ctxpipe serve "$@"
