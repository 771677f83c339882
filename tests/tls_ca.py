"""A certificate authority made for one test run (the ``cryptography`` package), and a
private redis-server that speaks only TLS.

:func:`make_pki` writes PEM files into a directory: a CA, a server certificate for
``localhost`` and ``127.0.0.1`` (or other names), a client certificate, and a second,
unrelated CA; keys are EC P-256, certificates valid for a day.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.conftest import RedisServer


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path  # the CA certificate that signed server and client
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here
    wrong_host_cert: Path  # signed by ``ca``, for another host name only
    wrong_host_key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn)).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, cn: str, names: list[str],
          usage: x509.ObjectIdentifier) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    builder = (
        x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = _ca("memorybus test CA")
    other, _ = _ca("some other CA")
    server, server_key = _leaf(ca, ca_key, "memorybus test server", list(hosts), ExtendedKeyUsageOID.SERVER_AUTH)
    client, client_key = _leaf(ca, ca_key, "memorybus test client", [], ExtendedKeyUsageOID.CLIENT_AUTH)
    wrong, wrong_key = _leaf(ca, ca_key, "elsewhere", ["redis.elsewhere.example"], ExtendedKeyUsageOID.SERVER_AUTH)
    p = Pki(directory, directory / "ca.pem", directory / "server.pem", directory / "server.key",
            directory / "client.pem", directory / "client.key", directory / "other-ca.pem",
            directory / "wrong-host.pem", directory / "wrong-host.key")
    for cert, path in ((ca, p.ca), (other, p.other_ca), (server, p.server_cert), (client, p.client_cert),
                       (wrong, p.wrong_host_cert)):
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    for key, path in ((server_key, p.server_key), (client_key, p.client_key), (wrong_key, p.wrong_host_key)):
        _write_key(key, path)
    return p


class TlsRedisServer(RedisServer):
    """A private redis-server on 127.0.0.1 that listens only on a TLS port (``--port 0``),
    with AOF fsync on every write; ``mutual`` requires a client certificate signed by
    the CA. ``cert``/``key`` default to the PKI's server pair. With ``password`` the
    default user needs it (``requirepass``), and ``url`` carries it."""

    def __init__(self, directory: Path, pki: Pki, *, mutual: bool = False, cert: Path | None = None,
                 key: Path | None = None, password: str | None = None) -> None:
        super().__init__(directory)
        self.pki, self.mutual, self.password = pki, mutual, password
        self.cert, self.key = cert or pki.server_cert, key or pki.server_key

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"rediss://{auth}127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        args = super().arguments()
        args[args.index("--port") + 1] = "0"
        return [*args, "--tls-port", str(self.port), "--tls-cert-file", str(self.cert),
                "--tls-key-file", str(self.key), "--tls-ca-cert-file", str(self.pki.ca),
                "--tls-auth-clients", "yes" if self.mutual else "no",
                *(["--requirepass", self.password] if self.password else [])]

    def admin(self, **kw: object) -> object:
        """The test's own client: trusts the CA, presents the client certificate, and
        does not check the host name (so it reaches a server with a wrong-host certificate)."""
        import redis

        return redis.Redis(port=self.port, ssl=True, ssl_ca_certs=str(self.pki.ca), ssl_check_hostname=False,
                           ssl_certfile=str(self.pki.client_cert), ssl_keyfile=str(self.pki.client_key),
                           password=self.password, **kw)
