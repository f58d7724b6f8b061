#!/usr/bin/env bash
# Start celery beat (the periodic schedule of beat_schedule.py), in the foreground.
# Run exactly ONE beat per cluster: two beats schedule every job twice.
#
#   ops/run-beat.sh [extra celery beat options…]
#
# The schedule state file lives in ${CTXPIPE_VAR_DIR:-var}/beat/ (keep it on local disk).
set -euo pipefail
source "$(dirname "$0")/_common.sh"

state="${CTXPIPE_VAR_DIR:-var}/beat"
mkdir -p "$state"
exec "$PYTHON" -m celery -A tasks.app beat --schedule="$state/celerybeat-schedule" \
  --loglevel="${LOGLEVEL:-INFO}" "$@"
