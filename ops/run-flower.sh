#!/usr/bin/env bash
# Start Flower (Celery monitoring UI) with basic auth, in the foreground.
#
#   ops/run-flower.sh [extra flower options…]
#
# Port: CTXPIPE_FLOWER_PORT (5555). Credentials: CTXPIPE_FLOWER_USER / CTXPIPE_FLOWER_PASSWORD,
# handed to Flower through its environment (FLOWER_BASIC_AUTH), never on the command line.
# Listens on FLOWER_ADDRESS (default 127.0.0.1; containers set 0.0.0.0).
set -euo pipefail
source "$(dirname "$0")/_common.sh"

user="${CTXPIPE_FLOWER_USER:-admin}"
password="${CTXPIPE_FLOWER_PASSWORD-ctxpipe}"  # the Settings default when unset (empty: refused)
if [[ -z "$password" || -z "$user" || "$user" == *:* ]]; then
  echo "error: Flower needs basic auth: CTXPIPE_FLOWER_USER (no ':') and CTXPIPE_FLOWER_PASSWORD" >&2
  exit 2
fi
address="${FLOWER_ADDRESS:-127.0.0.1}"
if [[ "$password" == ctxpipe ]]; then
  if [[ "$address" != 127.* && "$address" != localhost ]]; then
    echo "error: Flower on $address needs a password of your own: set CTXPIPE_FLOWER_PASSWORD" >&2
    exit 2
  fi
  echo "warning: Flower uses the default password; set CTXPIPE_FLOWER_PASSWORD" >&2
fi
export FLOWER_BASIC_AUTH="$user:$password"
unset FLOWER_ADDRESS  # Flower would also read it; pass it once, explicitly
exec "$PYTHON" -m celery -A tasks.app flower --port="${CTXPIPE_FLOWER_PORT:-5555}" \
  --address="$address" "$@"
