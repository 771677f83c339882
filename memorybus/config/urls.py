"""Server URLs that may carry a secret (``redis://user:password@host:port/db``).

:func:`redact_url` is the one way such a URL is shown: in ``repr(config)``, in
``Config.storage_identity()``, in error messages and logs. It never returns the
password (neither the userinfo's nor a ``password=`` query argument); a URL that
does not parse is not echoed at all, since its parts cannot be told apart.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from memorybus.config.sentinel_url import SENTINEL_SCHEMES, is_sentinel_url, misplaced_credentials, parse_sentinel_url
from memorybus.errors import ConfigError

REDIS_SCHEMES = ("redis", "rediss", "unix", *SENTINEL_SCHEMES)
_SECRET_QUERY_KEYS = frozenset({"password", "pass", "auth", "sentinel_password"})


def redact_url(url: str | None) -> str | None:
    """``url`` without its password; None and "" are returned as they are."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        if not is_sentinel_url(url):  # a sentinel URL lists several host:port: its parser checks them
            parts.port  # noqa: B018 - raises ValueError when the authority does not parse
        elif misplaced_credentials(url):
            raise ValueError("credentials past the authority")
    except ValueError:
        scheme = url.partition("://")[0] if "://" in url else ""
        known = scheme.isalpha() or scheme.lower() in SENTINEL_SCHEMES
        return f"{scheme}://<address that does not parse>" if known else "<URL that does not parse>"
    netloc = parts.netloc
    if "@" in netloc:
        creds, _, host = netloc.rpartition("@")
        user = creds.partition(":")[0]
        netloc = f"{user}@{host}" if user else host
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if is_sentinel_url(url):  # only its one non-secret option is shown (a misspelt password key is not)
            kept = [(k, v) for k, v in pairs if k == "sentinel_username"]
        else:
            kept = [(k, v) for k, v in pairs if k.lower() not in _SECRET_QUERY_KEYS]
        query = urlencode(kept)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def check_redis_url(url: str) -> None:
    """Raise ConfigError (naming the URL only redacted) unless ``url`` is a Redis URL
    redis-py can open: scheme redis, rediss or unix, and a numeric port if any; or a
    sentinel URL (:mod:`memorybus.config.sentinel_url`) whose every part is well formed."""
    if not isinstance(url, str):
        raise ConfigError("redis_url", "must be a string such as redis://user:password@host:6379/0")
    if is_sentinel_url(url):
        parse_sentinel_url(url)
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError when the authority does not parse
    except ValueError:
        raise ConfigError("redis_url", f"{redact_url(url)}: the host, port or credentials do not parse "
                                       "(a password with '/', '@', ':' or '#' must be percent-encoded)") from None
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigError("redis_url", f"{redact_url(url)}: the scheme must be one of {', '.join(REDIS_SCHEMES)}")
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError("redis_url", f"{redact_url(url)}: no host")


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` is this machine: ``localhost``, a loopback address, or None (a
    Unix socket). An empty host is not ("" binds every interface)."""
    if host is None or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
