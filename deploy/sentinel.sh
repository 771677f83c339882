#!/usr/bin/env bash
# A Redis Sentinel beside memorybus's Redis (deploy/redis.sh): failover without a person.
#
#   sentinel.sh configure [--force]  write $CONF (once: afterwards the sentinel keeps its own
#                                    state in it, such as the current master; --force
#                                    starts over from MEMORYBUS_SENTINEL_MASTER)
#   sentinel.sh start                start the supervisor unless running
#   sentinel.sh stop                 stop it
#   sentinel.sh status               the master's address as this sentinel sees it
#
# Run three sentinels on three machines (the head and two workers, or any three that fail
# independently), each watching the primary redis.sh server. When a quorum
# (MEMORYBUS_SENTINEL_QUORUM, 2 of 3) agrees the master has been unreachable for
# MEMORYBUS_SENTINEL_DOWN_AFTER_MS, one of them promotes the most up-to-date replica and
# points the other replicas (and the old master, when it returns) at it. memorybus follows:
#   Config.redis("redis+sentinel://memorybus:PASSWORD@s1:26379,s2:26379,s3:26379/memorybus/0"
#                "?sentinel_password=SENTINEL_PASSWORD")
# and acknowledges a write only when a replica has it (Config.redis_wait_replicas, 1 by
# default with such a URL), so a failover loses no acknowledged write. Keep at least two
# replicas: with one, the promoted master has no replica to confirm writes until the old
# master returns (writes fail with StoreUnavailable meanwhile, none is lost).
#
# Settings (the environment, as for redis.sh):
#   MEMORYBUS_SENTINEL_MASTER ("host port" of the primary; required)
#   MEMORYBUS_SENTINEL_NAME (memorybus: the master name in the URL)
#   MEMORYBUS_SENTINEL_PORT (26379)  MEMORYBUS_SENTINEL_BIND (127.0.0.1: set the node's private IP)
#   MEMORYBUS_SENTINEL_HOME (~/memorybus/sentinel)   MEMORYBUS_SENTINEL_QUORUM (2)
#   MEMORYBUS_SENTINEL_DOWN_AFTER_MS (5000)   MEMORYBUS_SENTINEL_FAILOVER_TIMEOUT_MS (60000)
#   MEMORYBUS_SENTINEL_ANNOUNCE_IP (this node's address as other sentinels reach it; optional)
#   MEMORYBUS_SENTINEL_PASSWORD_FILE (16+ characters; default MEMORYBUS_REDIS_PASSWORD_FILE): the
#     password clients give this sentinel (requirepass), that sentinels give each other, and of
#     the memorybus-sentinel ACL user on the data nodes (redis.sh makes it when it is given
#     the same MEMORYBUS_SENTINEL_PASSWORD_FILE)
#   MEMORYBUS_REDIS_TLS_CERT/_KEY/_CA: as for redis.sh; then the sentinel listens on TLS only and
#     reaches the data nodes over TLS (clients: rediss+sentinel://, Config(redis_tls_ca=...))
set -euo pipefail

PORT="${MEMORYBUS_SENTINEL_PORT:-26379}"
BIND="${MEMORYBUS_SENTINEL_BIND:-127.0.0.1}"
HOME_DIR="${MEMORYBUS_SENTINEL_HOME:-$HOME/memorybus/sentinel}"
NAME="${MEMORYBUS_SENTINEL_NAME:-memorybus}"
QUORUM="${MEMORYBUS_SENTINEL_QUORUM:-2}"
DOWN_AFTER="${MEMORYBUS_SENTINEL_DOWN_AFTER_MS:-5000}"
FAILOVER_TIMEOUT="${MEMORYBUS_SENTINEL_FAILOVER_TIMEOUT_MS:-60000}"
PASSWORD_FILE="${MEMORYBUS_SENTINEL_PASSWORD_FILE:-${MEMORYBUS_REDIS_PASSWORD_FILE:-}}"
TLS_CERT="${MEMORYBUS_REDIS_TLS_CERT:-}"
TLS_KEY="${MEMORYBUS_REDIS_TLS_KEY:-}"
TLS_CA="${MEMORYBUS_REDIS_TLS_CA:-}"
CONF="$HOME_DIR/sentinel.conf"
PIDS="$HOME_DIR/supervisor.pid"
LOG="$HOME_DIR/sentinel.log"
# shellcheck source=deploy/redis_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"

die() { echo "sentinel.sh: $*" >&2; exit 1; }

password() { tr -d '[:space:]' < "$PASSWORD_FILE"; }

cli() {
  local tls=()
  [ -n "$TLS_CERT" ] && tls=(--tls --cacert "$TLS_CA" --cert "$TLS_CERT" --key "$TLS_KEY")
  if [ -n "$PASSWORD_FILE" ]; then
    REDISCLI_AUTH="$(password)" redis-cli -h 127.0.0.1 -p "$PORT" "${tls[@]}" --no-auth-warning "$@"
  else
    redis-cli -h 127.0.0.1 -p "$PORT" "${tls[@]}" "$@"
  fi
}

configure() {
  if [ -s "$CONF" ] && [ "${1:-}" != "--force" ]; then
    echo "sentinel.sh: $CONF exists (it holds the sentinel's state); 'configure --force' to start over"
    return 0
  fi
  [ -n "${MEMORYBUS_SENTINEL_MASTER:-}" ] || die "MEMORYBUS_SENTINEL_MASTER must be \"host port\" of the primary"
  read -r mhost mport extra <<< "$MEMORYBUS_SENTINEL_MASTER"
  [ -n "$mhost" ] && [[ "$mport" =~ ^[0-9]+$ ]] && [ -z "${extra:-}" ] ||
    die "MEMORYBUS_SENTINEL_MASTER must be \"host port\", got \"$MEMORYBUS_SENTINEL_MASTER\""
  [[ "$QUORUM" =~ ^[1-9][0-9]*$ ]] || die "MEMORYBUS_SENTINEL_QUORUM must be a positive number"
  [[ "$NAME" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "MEMORYBUS_SENTINEL_NAME must be letters, digits, '.', '_' or '-'"
  if [ -n "$TLS_CERT$TLS_KEY$TLS_CA" ]; then
    for f in "$TLS_CERT" "$TLS_KEY" "$TLS_CA"; do
      [ -n "$f" ] && [ -r "$f" ] || die "TLS needs MEMORYBUS_REDIS_TLS_CERT, _KEY and _CA, readable (missing: '$f')"
    done
  fi
  mkdir -p "$HOME_DIR"
  ( umask 077
    {
      echo "# written by sentinel.sh configure; the sentinel rewrites it with its state"
      listener_conf
      echo "daemonize no"
      echo "dir $HOME_DIR"
      echo "logfile $LOG"
      [ -n "${MEMORYBUS_SENTINEL_ANNOUNCE_IP:-}" ] && echo "sentinel announce-ip $MEMORYBUS_SENTINEL_ANNOUNCE_IP"
      echo "sentinel monitor $NAME $mhost $mport $QUORUM"
      echo "sentinel down-after-milliseconds $NAME $DOWN_AFTER"
      echo "sentinel failover-timeout $NAME $FAILOVER_TIMEOUT"
      echo "sentinel parallel-syncs $NAME 1"
      if [ -n "$PASSWORD_FILE" ]; then
        pw="$(password)"
        [ "${#pw}" -ge 16 ] || die "$PASSWORD_FILE must hold a password of 16+ characters"
        echo "requirepass $pw"
        echo "sentinel sentinel-pass $pw"
        echo "sentinel auth-user $NAME memorybus-sentinel"
        echo "sentinel auth-pass $NAME $pw"
      fi
    } > "$CONF.tmp" && mv "$CONF.tmp" "$CONF" )
  echo "sentinel.sh: wrote $CONF (watching $NAME at $mhost:$mport, quorum $QUORUM)"
}

running() { [ -s "$PIDS" ] && kill -0 "$(cat "$PIDS")" 2>/dev/null; }

supervise() {
  trap 'kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0' TERM INT
  while true; do
    redis-server "$CONF" --sentinel &
    child=$!
    wait "$child" || true
    echo "$(date -u +%FT%TZ) sentinel (pid $child) exited; restarting in 1 s" >> "$LOG"
    sleep 1
  done
}

start() {
  if running; then echo "memorybus sentinel already supervised (pid $(cat "$PIDS"))"; return 0; fi
  [ -s "$CONF" ] || configure
  setsid "$0" _supervise < /dev/null >> "$LOG" 2>&1 &
  echo $! > "$PIDS"
  answers sentinel || die "the sentinel did not answer on port $PORT (see $LOG)"
}

stop() {
  if running; then
    kill -TERM -- "-$(cat "$PIDS")" 2>/dev/null || kill -TERM "$(cat "$PIDS")"
    for _ in $(seq 1 100); do kill -0 "$(cat "$PIDS")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$PIDS"
}

case "${1:-}" in
  configure) configure "${2:-}" ;;
  start) start ;;
  stop) stop ;;
  status) cli sentinel get-master-addr-by-name "$NAME" ;;
  _supervise) supervise ;;
  *) echo "usage: sentinel.sh configure [--force]|start|stop|status" >&2; exit 2 ;;
esac
