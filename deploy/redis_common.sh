# shellcheck shell=bash
# Shared by deploy/redis.sh and deploy/sentinel.sh (sourced, not run): the listening lines
# of their server's configuration file, and the wait for the started server. Reads PORT,
# BIND, TLS_CERT, TLS_KEY and TLS_CA, and calls cli, from the sourcing script.

listener_conf() {
  # the listening lines: with a certificate TLS only (port 0: no plaintext port), and
  # replication over TLS too, so replicas and sentinels reach the server over TLS
  if [ -n "$TLS_CERT" ]; then
    echo "port 0"
    echo "tls-port $PORT"
    echo "tls-cert-file $TLS_CERT"
    echo "tls-key-file $TLS_KEY"
    echo "tls-ca-cert-file $TLS_CA"
    echo "tls-auth-clients ${MEMORYBUS_REDIS_TLS_AUTH_CLIENTS:-no}"
    echo "tls-replication yes"
  else
    echo "port $PORT"
  fi
  echo "bind $BIND"
  echo "protected-mode yes"
}

answers() {
  # true once the server answers PING through the sourcing script's cli (10 s at most);
  # says "memorybus $1 up" then
  for _ in $(seq 1 100); do
    if cli ping 2>/dev/null | grep -q PONG; then echo "memorybus $1 up on port $PORT"; return 0; fi
    sleep 0.1
  done
  return 1
}
