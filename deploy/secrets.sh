#!/usr/bin/env bash
# The cluster's two secrets, made on the machine that runs `ray up` before the first
# `ray up` (cluster.yaml copies them to every node with file_mounts; never commit them):
#
#   ~/.memorybus/redis.password   the password of Redis's `memorybus` ACL user (deploy/redis.sh)
#   ~/.memorybus/ray_auth_token   Ray's cluster token (RAY_AUTH_MODE=token): every `ray start`,
#                                 driver, `ray job submit` and dashboard request must present it
#
#   bash deploy/secrets.sh            make whichever is missing (an existing one is kept)
#   bash deploy/secrets.sh --rotate   replace both; then a full `ray up cluster.yaml` (not
#                                     --restart-only: setup must run to load the new Redis
#                                     password) restarts Ray with the new token, and the bus
#                                     must be shut down and connected again: its actors keep
#                                     the Redis URL they were started with
#
# Both are 32 random bytes, hex, in files only their owner may read (umask 077).
# MEMORYBUS_SECRETS_DIR overrides ~/.memorybus (tests).
set -euo pipefail

DIR="${MEMORYBUS_SECRETS_DIR:-$HOME/.memorybus}"
ROTATE=0
case "${1:-}" in
  "") ;;
  --rotate) ROTATE=1 ;;
  *) echo "usage: secrets.sh [--rotate]" >&2; exit 2 ;;
esac

umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"
for name in redis.password ray_auth_token; do
  file="$DIR/$name"
  if [ "$ROTATE" = 1 ] || [ ! -s "$file" ]; then
    od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$file.tmp"
    mv "$file.tmp" "$file"
    echo "wrote $file"
  else
    echo "kept $file"
  fi
  chmod 600 "$file"
done
