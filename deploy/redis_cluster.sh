#!/usr/bin/env bash
# memorybus's Redis as one node of a Redis Cluster (cluster mode), beside the single
# server of deploy/redis.sh: the same settings, supervisor, ACL users and backups (it
# runs redis.sh), plus cluster mode. memorybus needs nothing else: a redis:// URL of any
# node is detected as a cluster (INFO cluster) and each shard's keys share one hash tag,
# so each shard lives in one slot of one primary.
#
#   redis_cluster.sh configure     redis.sh configure, then the cluster settings below
#   redis_cluster.sh start|stop|status|backup
#                                  as redis.sh (backup: this node's own data only)
#   redis_cluster.sh create HOST:PORT ...
#                                  once, on one node, when every node runs: join them,
#                                  MEMORYBUS_REDIS_CLUSTER_REPLICAS (1) replicas per primary
#                                  (so at least 3 x (1 + replicas) nodes)
#   redis_cluster.sh check         redis-cli --cluster check: slots covered, replicas in place
#   redis_cluster.sh add HOST:PORT add an empty primary; then `redis-cli --cluster rebalance
#                                  --cluster-use-empty-masters` moves slots (and so shards) to it
#
# Settings (besides redis.sh's, from the environment):
#   MEMORYBUS_REDIS_CLUSTER_NODE_TIMEOUT (5000 ms: a primary unreachable this long is failed
#                                         over to its replica)
#   MEMORYBUS_REDIS_CLUSTER_REPLICAS (1)
#   MEMORYBUS_REDIS_ANNOUNCE_IP (the address other nodes and clients reach this node on;
#                                default: the first of `hostname -I`)
#
# A failover promotes a replica, and Redis replicates asynchronously: give memorybus
# Config(redis_wait_replicas=1) so that a write is acknowledged only once a replica has it
# (WAIT). With that setting a primary without a live replica acknowledges nothing.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
HOME_DIR="${MEMORYBUS_REDIS_HOME:-$HOME/memorybus/redis}"
CONF="$HOME_DIR/redis.conf"
DIR="${MEMORYBUS_REDIS_DIR:-$HOME_DIR/data}"
PORT="${MEMORYBUS_REDIS_PORT:-6380}"
NODE_TIMEOUT="${MEMORYBUS_REDIS_CLUSTER_NODE_TIMEOUT:-5000}"
REPLICAS="${MEMORYBUS_REDIS_CLUSTER_REPLICAS:-1}"
ADMIN_PASS="$HOME_DIR/admin.pass"

admin_cli() {
  # as redis.sh's admin user; the password through the environment, not the command line
  if [ -s "$ADMIN_PASS" ]; then
    REDISCLI_AUTH="$(cat "$ADMIN_PASS")" redis-cli --user memorybus-admin --no-auth-warning "$@"
  else
    redis-cli "$@"
  fi
}

configure() {
  bash "$HERE/redis.sh" configure
  local announce="${MEMORYBUS_REDIS_ANNOUNCE_IP:-$(hostname -I 2>/dev/null | awk '{print $1}')}"
  {
    echo "# cluster mode (redis_cluster.sh configure)"
    echo "cluster-enabled yes"
    # the cluster's view of its nodes, kept with the data so that a restart rejoins
    echo "cluster-config-file $DIR/nodes.conf"
    echo "cluster-node-timeout $NODE_TIMEOUT"
    # a shard whose slot has no primary fails; the other shards go on
    echo "cluster-require-full-coverage no"
    if [ -n "$announce" ]; then echo "cluster-announce-ip $announce"; fi
  } >> "$CONF"
}

case "${1:-}" in
  configure) configure ;;
  start|stop|status|backup) bash "$HERE/redis.sh" "$1" ;;
  create)
    shift
    [ "$#" -ge $((3 * (1 + REPLICAS))) ] || {
      echo "redis_cluster.sh: create needs at least $((3 * (1 + REPLICAS))) nodes (3 primaries, $REPLICAS replicas each)" >&2
      exit 2; }
    admin_cli --cluster create "$@" --cluster-replicas "$REPLICAS" --cluster-yes ;;
  check) admin_cli --cluster check "127.0.0.1:$PORT" ;;
  add)
    admin_cli --cluster add-node "${2:?usage: redis_cluster.sh add HOST:PORT}" "127.0.0.1:$PORT" ;;
  *) echo "usage: redis_cluster.sh configure|start|stop|status|backup|create HOST:PORT...|check|add HOST:PORT" >&2
     exit 2 ;;
esac
