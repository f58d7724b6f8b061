#!/usr/bin/env bash
# Start one Celery worker for a role, in the foreground (systemd, supervisord, containers).
#
#   ops/run-worker.sh commit|extract|embed|maintenance [extra celery worker options…]
#
# role         queue        pool                 concurrency (WORKER_CONCURRENCY overrides)
# commit       commit       prefork              2  (archive, plan, write, register)
# extract      extract      prefork              4  (the four extractors; LLM-bound)
# embed        embed        solo                 1  (one process per GPU: the model loads lazily
#                                                    after start; pin with CUDA_VISIBLE_DEVICES)
# maintenance  maintenance  prefork              1  (beat jobs: sweep, drain, repair, retention)
#
# Settings come from the CTXPIPE_* environment (same Redis/PostgreSQL URLs and the same shared
# CTXPIPE_FS_ROOT on every machine). WORKER_NAME overrides the node name (default role@host,
# embed-gpuN@host when CUDA_VISIBLE_DEVICES=N).
set -euo pipefail
source "$(dirname "$0")/_common.sh"

role="${1:-}"
case "$role" in
  commit)      pool=prefork; concurrency="${WORKER_CONCURRENCY:-2}" ;;
  extract)     pool=prefork; concurrency="${WORKER_CONCURRENCY:-4}" ;;
  embed)       pool=solo;    concurrency=1 ;;
  maintenance) pool=prefork; concurrency="${WORKER_CONCURRENCY:-1}" ;;
  *)
    echo "usage: $0 commit|extract|embed|maintenance [celery worker options…]" >&2
    exit 2 ;;
esac
shift

node="${WORKER_NAME:-}"
if [[ -z "$node" ]]; then
  node="$role@%h"
  if [[ "$role" == embed && -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
    node="embed-gpu${CUDA_VISIBLE_DEVICES//,/-}@%h"  # one solo worker per GPU, distinct names
  fi
fi

args=(-m celery -A tasks.app worker -Q "$role" -n "$node" --pool="$pool" --loglevel="${LOGLEVEL:-INFO}")
if [[ "$pool" != solo ]]; then
  args+=(--concurrency="$concurrency")
fi
exec "$PYTHON" "${args[@]}" "$@"
