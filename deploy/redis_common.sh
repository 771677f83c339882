# shellcheck shell=bash
# Shared by deploy/redis.sh and deploy/sentinel.sh (sourced, not run): what both write into
# their server's configuration file. Reads PORT, BIND, TLS_CERT, TLS_KEY and TLS_CA from the
# sourcing script.

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
