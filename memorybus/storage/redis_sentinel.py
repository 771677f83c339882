"""Redis through Sentinel: a client that follows the master across failovers.

:func:`open_sentinel` turns a ``redis+sentinel://`` / ``rediss+sentinel://`` URL
(:mod:`memorybus.config.urls`) into a redis-py client whose connections are
made to whatever node the sentinels currently name as the master.

Guarantees:

- **It follows the master.** Every new connection asks the sentinels (in turn, the
  last one that answered first) for the master's address. A connection to a dead
  master fails with ``ConnectionError``; a connection to a demoted master meets
  ``READONLY`` and is dropped the same way; redis-py's retry then reconnects to the
  promoted node. While no master is known (between the old one's death and the
  sentinels' vote) commands fail with ``ConnectionError`` (``MasterNotFoundError``),
  which the store maps to :class:`~memorybus.errors.StoreUnavailable`.
- **TLS and ACLs as for one server.** ``rediss+sentinel://`` uses TLS to the sentinels
  and to the data nodes, with the same verification as ``rediss://``
  (:class:`~memorybus.storage.redis_client.RedisTLS`: CA, host name, optional client
  certificate); the URL's ``user:password`` log in to the data nodes, the
  ``sentinel_username``/``sentinel_password`` options to the sentinels.
- **No password in any message**: the URL is only ever shown redacted.

Whether a write survives the failover is decided elsewhere: by ``WAIT`` after each
commit (:class:`~memorybus.storage.redis.RedisStore`, ``Config.redis_wait_replicas``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memorybus.config.urls import parse_sentinel_url, redact_url
from memorybus.errors import ConfigError
from memorybus.storage.redis_tls import RedisTLS, warn_if_plaintext

if TYPE_CHECKING:
    import redis


def open_sentinel(url: str, *, tls: RedisTLS | None = None, socket_timeout: float = 5.0) -> redis.Redis:
    """A client for the master that the sentinels of ``url`` name (no command sent yet).
    ConfigError when the URL does not parse, a TLS file is missing, or TLS files come
    with a plaintext ``redis+sentinel://`` URL."""
    from redis.sentinel import Sentinel, SentinelConnectionPool

    spec = parse_sentinel_url(url)
    tls = tls or RedisTLS()
    common: dict[str, Any] = {"socket_timeout": socket_timeout, "socket_connect_timeout": socket_timeout}
    if spec.tls:
        tls.check_files()
        common.update(ssl=True, ssl_cert_reqs="required", ssl_check_hostname=True, ssl_ca_certs=tls.ca,
                      ssl_certfile=tls.cert, ssl_keyfile=tls.key)
    elif tls:
        raise ConfigError("redis_tls_ca", f"{redact_url(url)}: TLS files are set but the URL is not "
                                          "rediss+sentinel:// (they would be ignored and the connections plaintext)")
    else:
        for host, port in spec.sentinels:
            warn_if_plaintext(f"redis://{host}:{port}")

    class _Pool(SentinelConnectionPool):
        """Closing the client also closes its connections to the sentinels."""

        def disconnect(self, *args: Any, **kw: Any) -> None:
            super().disconnect(*args, **kw)
            for client in self.sentinel_manager.sentinels:
                client.connection_pool.disconnect()

    sentinel_kwargs = dict(common, username=spec.sentinel_username, password=spec.sentinel_password)
    manager = Sentinel(spec.sentinels, sentinel_kwargs=sentinel_kwargs, **common)
    return manager.master_for(spec.master, connection_pool_class=_Pool, db=spec.db, username=spec.username,
                              password=spec.password)
