"""Server URLs that may carry a secret (``redis://user:password@host:port/db``).

:func:`redact_url` is the one way such a URL is shown: in ``repr(config)``, in
``Config.storage_identity()``, in error messages and logs. It never returns the
password (neither the userinfo's nor a ``password=`` query argument); a URL that
does not parse is not echoed at all, since its parts cannot be told apart.

**Redis Sentinel URLs** name where the sentinels are, which master they watch, and how
to log in. Form (one URL names the whole replicated set)::

    redis+sentinel://[user:password@]host1:port1[,host2:port2...]/<master-name>[/<db>][?options]
    rediss+sentinel://...   the same over TLS, to the sentinels and to the data nodes

- the hosts are the **sentinels** (port 26379 when omitted), at least one; list them
  all: the client asks them in turn for the current master;
- ``user:password`` log in to the **data nodes** (master and replicas: the bus's ACL user);
- ``<master-name>`` is the name the sentinels monitor (``sentinel monitor <name> ...``);
  ``<db>`` the database number (0 when omitted);
- options: ``sentinel_username`` / ``sentinel_password`` when the sentinels themselves
  require a login (``requirepass`` / ``sentinel sentinel-pass`` in sentinel.conf); no other
  option is accepted (a typo would otherwise be ignored silently).

:func:`parse_sentinel_url` raises :class:`ConfigError` for anything else, naming the URL
only as :func:`redact_url` shows it (no password, neither the data
nodes' nor the sentinels').
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from memorybus.errors import ConfigError

# ---------------------------------------------------------- Sentinel URLs

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_SENTINEL_PORT = 26379
_OPTIONS = frozenset({"sentinel_username", "sentinel_password"})
_MASTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HOST = re.compile(r"^[A-Za-z0-9._-]+$|^\[[0-9A-Fa-f:.]+\]$")


@dataclass(frozen=True, slots=True, repr=False)
class SentinelURL:
    """A parsed sentinel URL. ``repr`` shows no password."""

    tls: bool
    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None)
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None)

    def __repr__(self) -> str:
        hosts = ",".join(f"{h}:{p}" for h, p in self.sentinels)
        return f"SentinelURL(tls={self.tls}, sentinels={hosts}, master={self.master!r}, db={self.db})"


def is_sentinel_url(url: object) -> bool:
    return isinstance(url, str) and url.partition("://")[0].lower() in SENTINEL_SCHEMES


def misplaced_credentials(url: str) -> bool:
    """Whether an '@' comes after the end of the authority (a password holding an
    unencoded '/', '?' or '#'): then no part of the URL may be shown."""
    rest = url.partition("://")[2]
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    return "@" in rest[end:]


def _host_port(item: str, shown: str) -> tuple[str, int]:
    if item.startswith("["):  # an IPv6 address: [::1]:26379
        host, _, rest = item.partition("]")
        host += "]"
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ConfigError("redis_url", f"{shown}: sentinel address {item!r} does not parse")
    else:
        host, _, port_text = item.partition(":")
    if not host or not _HOST.match(host):
        raise ConfigError("redis_url", f"{shown}: sentinel host {host!r} is not a host name or address")
    if not port_text:
        return host.strip("[]"), DEFAULT_SENTINEL_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError("redis_url", f"{shown}: sentinel port {port_text!r} of {host} is not a port number")
    return host.strip("[]"), int(port_text)


def parse_sentinel_url(url: str) -> SentinelURL:
    """The parts of a ``redis+sentinel://`` / ``rediss+sentinel://`` URL; ConfigError
    (naming the URL redacted) unless every part is well formed."""
    shown = redact_url(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        raise ConfigError("redis_url", f"{shown}: a sentinel URL starts with redis+sentinel:// or rediss+sentinel://")
    if misplaced_credentials(url) or "#" in rest:
        raise ConfigError("redis_url", f"{shown}: the credentials do not parse (a password with '/', '?', '#' "
                                       "or '@' must be percent-encoded)")
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    creds, at, hosts = netloc.rpartition("@")
    if not at:
        hosts, creds = netloc, ""
    username = password = None
    if at:
        user_text, colon, pass_text = creds.partition(":")
        username = unquote(user_text) or None
        password = unquote(pass_text) if colon else None
    if not hosts:
        raise ConfigError("redis_url", f"{shown}: no sentinel host (redis+sentinel://host1:26379,host2:26379/"
                                       "<master-name>/<db>)")
    sentinels = tuple(_host_port(item, str(shown)) for item in hosts.split(","))
    if len(set(sentinels)) != len(sentinels):
        raise ConfigError("redis_url", f"{shown}: a sentinel is listed twice")
    parts = path.split("/") if slash else []
    if not parts or not parts[0]:
        raise ConfigError("redis_url", f"{shown}: no master name: the path is /<master-name>/<db>, the name the "
                                       "sentinels monitor")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] == ""):
        raise ConfigError("redis_url", f"{shown}: the path must be /<master-name> or /<master-name>/<db>")
    master = unquote(parts[0])
    if not _MASTER_NAME.match(master):
        raise ConfigError("redis_url", f"{shown}: master name {master!r} must be letters, digits, '.', '_' or '-'")
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit() or int(parts[1]) > 1_000_000:
            raise ConfigError("redis_url", f"{shown}: database {parts[1]!r} is not a database number")
        db = int(parts[1])
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _OPTIONS:
            raise ConfigError("redis_url", f"{shown}: unknown option {key!r} (a sentinel URL accepts "
                                           f"{', '.join(sorted(_OPTIONS))})")
        if key in options:
            raise ConfigError("redis_url", f"{shown}: option {key!r} given twice")
        options[key] = value
    return SentinelURL(scheme.lower() == "rediss+sentinel", sentinels, master, db, username, password,
                       options.get("sentinel_username") or None, options.get("sentinel_password") or None)


# ------------------------------------------------------------ any Redis URL
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
    sentinel URL (above) whose every part is well formed."""
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
