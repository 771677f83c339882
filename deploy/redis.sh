#!/usr/bin/env bash
# memorybus's Redis on the cluster head: configured, supervised, backed up, restorable.
#
#   redis.sh configure        write $CONF from the settings below (run on every `ray up`)
#   redis.sh start            start the supervisor (and the backup loop) unless running
#   redis.sh stop             stop the supervisor and Redis (clean SHUTDOWN: AOF fsync'd)
#   redis.sh status           PONG when Redis answers
#   redis.sh backup           one consistent snapshot (BGSAVE) copied into $BACKUP_DIR; its time
#                             goes to the hash memorybus:backups (field redis) for monitoring
#   redis.sh restore FILE     replace the data with a snapshot (stops and restarts Redis)
#
# The supervisor restarts redis-server whenever it exits (crash, OOM kill, kill -9);
# acknowledged writes survive because the AOF is fsync'd on every write
# (appendfsync always) on $DIR, a volume that outlives the node (see cluster.yaml).
#
# Access (with a password file): Redis ACL users, the default user off.
#   memorybus        the bus's user (Config.redis("redis://memorybus:PASSWORD@host:port/0")):
#                    every data command; no admin or dangerous ones (FLUSHALL, KEYS,
#                    SHUTDOWN, CONFIG SET, ACL, DEBUG, ...) except CONFIG GET and INFO,
#                    which memorybus reads at connect to check appendfsync always, and
#                    PSYNC/REPLCONF, which a replica (redis_replica) uses to follow the head.
#   memorybus-admin  this script's own user (shutdown, BGSAVE, restore): its password is
#                    made on this node ($HOME_DIR/admin.pass, 0600) and never leaves it.
# users.acl holds only SHA-256 hashes of the passwords; auth.conf (0600) holds the
# plaintext that a replica needs to authenticate to its primary (masterauth).
# A rotated password file takes effect on the next `configure` + `start` (ACL LOAD).
# Every setting comes from the environment (cluster.yaml's ~/.memorybus.env):
#   MEMORYBUS_REDIS_PORT (6380)     MEMORYBUS_REDIS_BIND ("127.0.0.1")
#   MEMORYBUS_REDIS_DIR (data; AOF and snapshots)   MEMORYBUS_REDIS_HOME (~/memorybus/redis)
#   MEMORYBUS_REDIS_PASSWORD_FILE (the memorybus user's password, 16+ characters; none:
#                                  no ACL, the default user without a password: loopback only)
#   MEMORYBUS_REDIS_USER (memorybus: the bus's ACL user)
#   MEMORYBUS_REDIS_MAXMEMORY (bytes; default 60% of this machine's memory)
#   MEMORYBUS_REDIS_REPLICAOF ("host port": run as a replica of the primary)
#   MEMORYBUS_BACKUP_DIR ($DIR/../backups)   MEMORYBUS_BACKUP_INTERVAL (3600 s; 0: no loop)
#   MEMORYBUS_BACKUP_KEEP (48 snapshots)     MEMORYBUS_BACKUP_S3 (s3://bucket/prefix, optional)
#   MEMORYBUS_REDIS_MIN_REPLICAS (0; N: refuse writes unless N replicas are connected and at most
#                                 10 s behind: an old master cut off from its replicas stops accepting writes)
#
# TLS (tls-port mode): with MEMORYBUS_REDIS_TLS_CERT and _KEY (PEM; e.g. the node's certificate
# from deploy/tls.sh node, which names 127.0.0.1, the node's IPs and host name) Redis listens
# only on TLS, on MEMORYBUS_REDIS_PORT (port 0: no plaintext port), replicates over TLS
# (tls-replication), and this script's redis-cli speaks TLS too. Clients then use
# rediss://memorybus:PASSWORD@host:port/0 with Config(redis_tls_ca=<the CA's PEM>).
#   MEMORYBUS_REDIS_TLS_CA (the CA that signed client and peer certificates; needed)
#   MEMORYBUS_REDIS_TLS_AUTH_CLIENTS (no; yes: every client presents a certificate signed by
#                                     the CA: Config(redis_tls_cert=..., redis_tls_key=...))
#
# Sentinel (deploy/sentinel.sh watches this server and its replicas): the ACL user
# memorybus-sentinel, with only the commands a sentinel sends (INFO, PING, REPLICAOF,
# CONFIG REWRITE, CLIENT, the hello channel), made only when MEMORYBUS_SENTINEL_PASSWORD_FILE
# names its password file (it may be the memorybus user's file).
set -euo pipefail

PORT="${MEMORYBUS_REDIS_PORT:-6380}"
BIND="${MEMORYBUS_REDIS_BIND:-127.0.0.1}"
HOME_DIR="${MEMORYBUS_REDIS_HOME:-$HOME/memorybus/redis}"
DIR="${MEMORYBUS_REDIS_DIR:-$HOME_DIR/data}"
CONF="$HOME_DIR/redis.conf"
AUTH="$HOME_DIR/auth.conf"
ACL="$HOME_DIR/users.acl"
ADMIN_PASS="$HOME_DIR/admin.pass"
BUS_USER="${MEMORYBUS_REDIS_USER:-memorybus}"
ADMIN_USER=memorybus-admin
PIDS="$HOME_DIR/supervisor.pid"
LOG="$HOME_DIR/redis.log"
BACKUP_DIR="${MEMORYBUS_BACKUP_DIR:-$(dirname "$DIR")/backups}"
BACKUP_INTERVAL="${MEMORYBUS_BACKUP_INTERVAL:-3600}"
BACKUP_KEEP="${MEMORYBUS_BACKUP_KEEP:-48}"
TLS_CERT="${MEMORYBUS_REDIS_TLS_CERT:-}"
TLS_KEY="${MEMORYBUS_REDIS_TLS_KEY:-}"
TLS_CA="${MEMORYBUS_REDIS_TLS_CA:-}"
SENTINEL_USER=memorybus-sentinel
# shellcheck source=deploy/redis_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/redis_common.sh"

tls_args() {
  # redis-cli's TLS options when the server listens on TLS only
  [ -n "$TLS_CERT" ] && echo "--tls --cacert $TLS_CA --cert $TLS_CERT --key $TLS_KEY"
  return 0
}

cli() {
  # as the admin user; the password through the environment, not the command line (ps)
  if [ -s "$ADMIN_PASS" ]; then
    # shellcheck disable=SC2046
    REDISCLI_AUTH="$(cat "$ADMIN_PASS")" redis-cli -h 127.0.0.1 -p "$PORT" $(tls_args) --user "$ADMIN_USER" \
      --no-auth-warning "$@"
  else
    # shellcheck disable=SC2046
    redis-cli -h 127.0.0.1 -p "$PORT" $(tls_args) "$@"
  fi
}

sha256() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

log() { echo "$(date -u +%FT%TZ) $*" >> "$LOG"; }

check_tls() {
  [ -z "$TLS_CERT$TLS_KEY$TLS_CA" ] && return 0
  if [ -z "$TLS_CERT" ] || [ -z "$TLS_KEY" ] || [ -z "$TLS_CA" ]; then
    echo "redis.sh: TLS needs MEMORYBUS_REDIS_TLS_CERT, MEMORYBUS_REDIS_TLS_KEY and MEMORYBUS_REDIS_TLS_CA (all three)" >&2
    exit 1
  fi
  for f in "$TLS_CERT" "$TLS_KEY" "$TLS_CA"; do
    [ -r "$f" ] || { echo "redis.sh: TLS file $f is not readable" >&2; exit 1; }
  done
}

configure() {
  check_tls
  mkdir -p "$HOME_DIR" "$DIR" "$BACKUP_DIR"
  ( umask 077
    : > "$AUTH"; rm -f "$AUTH.pass"
    if [ -n "${MEMORYBUS_REDIS_PASSWORD_FILE:-}" ]; then
      pw="$(tr -d '[:space:]' < "$MEMORYBUS_REDIS_PASSWORD_FILE")"
      if [ "${#pw}" -lt 16 ]; then
        echo "redis.sh: $MEMORYBUS_REDIS_PASSWORD_FILE must hold a password of 16+ characters" >&2; exit 1
      fi
      # this node's admin password: made once, kept across configure runs
      [ -s "$ADMIN_PASS" ] || od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$ADMIN_PASS"
      {
        # the default user is off (nobody can log in as it) but keeps every permission: a
        # Redis without the fix for redis/redis#14541 (7.0.15 among them) replays the AOF's
        # MULTI/EXEC blocks (how memorybus's Lua writes are logged) with the default user's
        # permissions and silently drops those it may not run: acknowledged writes lost
        echo "user default off resetpass ~* &* +@all"
        echo "user $BUS_USER on #$(sha256 "$pw") ~* &* +@all -@dangerous +config|get +info +psync +replconf"
        echo "user $ADMIN_USER on #$(sha256 "$(cat "$ADMIN_PASS")") ~* &* +@all"
        if [ -n "${MEMORYBUS_SENTINEL_PASSWORD_FILE:-}" ]; then
          spw="$(tr -d '[:space:]' < "$MEMORYBUS_SENTINEL_PASSWORD_FILE")"
          echo "user $SENTINEL_USER on #$(sha256 "$spw") resetchannels &__sentinel__:hello -@all +multi +exec" \
               "+slaveof +replicaof +ping +info +role +publish +subscribe +config|rewrite +client|setname" \
               "+client|kill +script|kill"
        fi
      } > "$ACL"
      printf 'aclfile %s\nmasteruser %s\nmasterauth %s\n' "$ACL" "$BUS_USER" "$pw" > "$AUTH"
    else
      rm -f "$ACL" "$ADMIN_PASS"
    fi )
  local maxmemory="${MEMORYBUS_REDIS_MAXMEMORY:-$(awk '/MemTotal/ {printf "%d", $2 * 1024 * 0.6}' /proc/meminfo)}"
  {
    echo "# written by redis.sh configure; edit the environment, not this file"
    listener_conf
    echo "dir $DIR"
    echo "daemonize no"
    echo "logfile $LOG"
    # durability: every acknowledged write is on disk (AOF, fsync per write)
    echo "appendonly yes"
    echo "appendfsync always"
    echo "aof-use-rdb-preamble yes"
    echo "aof-load-truncated yes"
    # snapshots are taken on demand by 'redis.sh backup' (BGSAVE), not on a timer
    echo 'save ""'
    echo "dbfilename dump.rdb"
    # never evict a record: at the limit, writes fail (memorybus raises StoreUnavailable)
    echo "maxmemory $maxmemory"
    echo "maxmemory-policy noeviction"
    if [ -n "${MEMORYBUS_REDIS_REPLICAOF:-}" ]; then
      echo "replicaof ${MEMORYBUS_REDIS_REPLICAOF}"
      echo "replica-read-only yes"
    fi
    if [ "${MEMORYBUS_REDIS_MIN_REPLICAS:-0}" != 0 ]; then
      echo "min-replicas-to-write $MEMORYBUS_REDIS_MIN_REPLICAS"
      echo "min-replicas-max-lag 10"
    fi
    echo "include $AUTH"
  } > "$CONF"
}

running() { [ -s "$PIDS" ] && kill -0 "$(cat "$PIDS")" 2>/dev/null; }

supervise() {
  # the loop itself: one redis-server in the foreground, restarted whenever it exits
  trap 'cli shutdown >/dev/null 2>&1 || true; exit 0' TERM INT
  while true; do
    redis-server "$CONF" &
    child=$!
    wait "$child" || true
    log "redis-server (pid $child) exited; restarting in 1 s"
    sleep 1
  done
}

backup_loop() {
  while sleep "$BACKUP_INTERVAL"; do backup || log "backup failed"; done
}

start() {
  if running; then
    # a password rotated since the server started: load the users configure wrote
    if [ -s "$ACL" ]; then cli acl load >/dev/null || echo "redis.sh: ACL LOAD failed (see $LOG)" >&2; fi
    echo "memorybus redis already supervised (pid $(cat "$PIDS"))"; return 0
  fi
  [ -f "$CONF" ] || configure
  # a session of its own: 'ray stop' and the shell that ran this do not take it down
  setsid "$0" _supervise < /dev/null >> "$LOG" 2>&1 &
  echo $! > "$PIDS"
  if [ "$BACKUP_INTERVAL" != "0" ]; then
    setsid "$0" _backup_loop < /dev/null >> "$LOG" 2>&1 &
    echo $! > "$PIDS.backup"
  fi
  answers redis && return 0
  echo "redis.sh: redis-server did not answer on port $PORT (see $LOG)" >&2
  return 1
}

stop() {
  for f in "$PIDS.backup" "$PIDS"; do
    if [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
      # each runs in a session of its own (setsid): signal its whole group, so the
      # backup loop's sleep does not outlive it
      kill -TERM -- "-$(cat "$f")" 2>/dev/null || kill -TERM "$(cat "$f")"
      for _ in $(seq 1 100); do kill -0 "$(cat "$f")" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
  done
  cli shutdown >/dev/null 2>&1 || true
}

persistence() { cli info persistence | tr -d '\r' | awk -F: -v k="$1" '$1 == k {print $2}'; }

backup() {
  mkdir -p "$BACKUP_DIR"
  local before
  before="$(persistence rdb_saves)"
  # SCHEDULE: if an AOF rewrite is running, the snapshot starts when it ends
  cli bgsave schedule >/dev/null
  for _ in $(seq 1 3000); do
    [ "$(persistence rdb_saves)" -gt "$before" ] && [ "$(persistence rdb_bgsave_in_progress)" = 0 ] && break
    sleep 0.1
  done
  if [ "$(persistence rdb_saves)" -le "$before" ] || [ "$(persistence rdb_last_bgsave_status)" != ok ]; then
    echo "redis.sh: BGSAVE did not finish (see $LOG)" >&2
    return 1
  fi
  local out
  out="$BACKUP_DIR/dump-$(date -u +%Y%m%dT%H%M%SZ).rdb"
  cp "$DIR/dump.rdb" "$out.tmp" && mv "$out.tmp" "$out"
  if [ -n "${MEMORYBUS_BACKUP_S3:-}" ]; then aws s3 cp --only-show-errors "$out" "$MEMORYBUS_BACKUP_S3/"; fi
  ls -1t "$BACKUP_DIR"/dump-*.rdb | tail -n +"$((BACKUP_KEEP + 1))" | xargs -r rm -f
  # the backup-age metric: every shard reads this hash (memorybus_backup_last_success_timestamp_seconds{kind="redis"})
  cli hset memorybus:backups redis "$(date -u +%s)" >/dev/null || log "backup $out: could not record its time"
  log "backup $out"
  echo "$out"
}

restore() {
  local file="$1"
  [ -s "$file" ] || { echo "redis.sh: no snapshot at $file" >&2; exit 1; }
  stop
  local aside
  aside="$DIR.before-restore-$(date -u +%Y%m%dT%H%M%SZ)"
  mv "$DIR" "$aside" && mkdir -p "$DIR" && cp "$file" "$DIR/dump.rdb"
  # load the snapshot without AOF, then let Redis write a fresh AOF from memory
  redis-server "$CONF" --appendonly no --daemonize yes --pidfile "$HOME_DIR/restore.pid"
  for _ in $(seq 1 100); do cli ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
  cli config set appendonly yes >/dev/null
  for _ in $(seq 1 3000); do
    [ "$(persistence aof_enabled)" = 1 ] && [ "$(persistence aof_rewrite_in_progress)" = 0 ] && \
      [ "$(persistence aof_rewrite_scheduled)" = 0 ] && break
    sleep 0.1
  done
  cli shutdown >/dev/null 2>&1 || true
  for _ in $(seq 1 100); do [ -e "$HOME_DIR/restore.pid" ] || break; sleep 0.1; done
  echo "restored $file (previous data kept in $aside)"
  start
}

case "${1:-}" in
  configure) configure ;;
  start) start ;;
  stop) stop ;;
  status) cli ping ;;
  backup) backup ;;
  restore) restore "${2:?usage: redis.sh restore FILE}" ;;
  _supervise) supervise ;;
  _backup_loop) backup_loop ;;
  *) echo "usage: redis.sh configure|start|stop|status|backup|restore FILE" >&2; exit 2 ;;
esac
