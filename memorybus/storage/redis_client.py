"""The one place memorybus opens a Redis connection: plaintext ``redis://``, a Unix
socket ``unix://``, or TLS ``rediss://``; or a master found through Redis Sentinel
(``redis+sentinel://``, ``rediss+sentinel://``: :mod:`memorybus.storage.redis_sentinel`).

Guarantees:

- **TLS verifies.** A ``rediss://`` connection checks the server's certificate against
  ``RedisTLS.ca`` (a PEM bundle; None: the system's trust store) and checks that it
  names the URL's host (``ssl_cert_reqs=required``, ``ssl_check_hostname=True``);
  there is no switch to turn either off. ``RedisTLS.cert``/``key`` present a client
  certificate (mutual TLS, ``tls-auth-clients yes`` on the server).
- **Files checked first.** A TLS file that is missing or unreadable raises
  :class:`ConfigError` naming its field and path before anything is sent; TLS
  files with a plaintext URL are a ConfigError too (they would be ignored silently).
- **Plaintext off the machine is said once.** A ``redis://`` URL whose host is not a
  loopback address logs one warning per host per process: the password and every
  record cross the network in clear.
- **No password in any message.** Errors name the server by its redacted URL
  (:func:`memorybus.config.urls.redact_url`); redis-py's own texts (which may quote
  the URL) are never passed on for URLs that do not parse.

Connection errors surface when the first command runs (the caller maps them to
StoreUnavailable, see :func:`describe`). redis-py is imported only by :func:`open_redis`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from memorybus.config.urls import is_sentinel_url, redact_url
from memorybus.errors import ConfigError
from memorybus.storage.redis_tls import RedisTLS, warn_if_plaintext

if TYPE_CHECKING:
    import redis

def open_redis(url: str, *, tls: RedisTLS | None = None, socket_timeout: float = 5.0) -> redis.Redis:
    """A redis-py client for ``url`` (no command sent yet). ConfigError when the URL
    does not parse, or a TLS file is missing, or TLS files come with a non-TLS URL.
    A ``redis+sentinel://`` URL gives a client that follows the sentinels' master
    (:mod:`memorybus.storage.redis_sentinel`); a ``redis://``/``rediss://`` URL of a node
    in cluster mode (it is asked ``INFO cluster``) a :class:`redis.cluster.RedisCluster`
    (:mod:`memorybus.storage.redis_cluster`)."""
    import redis  # here, not at import: this module's RedisTLS is used where redis is not installed

    if is_sentinel_url(url):
        from memorybus.storage.redis_sentinel import open_sentinel

        return open_sentinel(url, tls=tls, socket_timeout=socket_timeout)

    tls = tls or RedisTLS()
    where = redact_url(url)
    scheme = url.partition("://")[0].lower() if isinstance(url, str) else ""
    kwargs: dict[str, Any] = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_timeout}
    if scheme == "rediss":
        tls.check_files()
        kwargs.update(ssl_cert_reqs="required", ssl_check_hostname=True, ssl_ca_certs=tls.ca,
                      ssl_certfile=tls.cert, ssl_keyfile=tls.key)
    elif tls:
        raise ConfigError("redis_tls_ca", f"{where}: TLS files are set but the URL is not rediss:// (they would be "
                                          "ignored and the connection would be plaintext)")
    if scheme == "unix":
        kwargs.pop("socket_connect_timeout")
    try:
        client = redis.Redis.from_url(url, **kwargs)
        if scheme != "unix":  # a node of a Redis Cluster: the cluster client (memorybus.storage.redis_cluster)
            from memorybus.storage.redis_cluster import open_cluster_if_enabled

            cluster = open_cluster_if_enabled(url, kwargs)
            if cluster is not None:  # the same commands, routed by key: typed as the plain client
                client.close()
                client = cast("redis.Redis", cluster)
    except (ValueError, TypeError):  # its text may quote any part of the URL, password included
        raise ConfigError("redis_url", f"{where}: not a Redis URL redis-py can open") from None
    warn_if_plaintext(url)
    return client


def describe(exc: BaseException, where: str | None) -> str:
    """A message for a Redis error met while opening ``where`` (a redacted URL), with
    what to do when it is a TLS failure."""
    text = f"{where}: {type(exc).__name__}: {exc}"
    low = str(exc).lower()
    if "certificate verify failed" in low:
        if "hostname mismatch" in low or "ip address mismatch" in low or "doesn't match" in low:
            return f"{text} (the server's certificate does not name the host in the URL: connect by a name or " \
                   "address its certificate lists)"
        return f"{text} (the server's certificate is not signed by a CA this client trusts: set " \
               "Config(redis_tls_ca=<the CA's PEM file>))"
    if "certificate required" in low or "alert certificate" in low or "alert unknown ca" in low:
        return f"{text} (the server requires a client certificate signed by a CA it trusts: set " \
               "Config(redis_tls_cert=..., redis_tls_key=...))"
    if ("wrong version number" in low or "record layer failure" in low or "unexpected eof" in low
            or "eof occurred in violation of protocol" in low):  # a server that drops a client without a cert
        return f"{text} (TLS handshake failed: is the port a TLS port, and does the server accept this client? " \
               "A server with tls-auth-clients yes needs Config(redis_tls_cert=..., redis_tls_key=...))"
    if "connection reset" in low or "connection closed by server" in low:
        return f"{text} (a plaintext redis:// URL to a TLS port, or a server that requires a client certificate?)"
    return text
