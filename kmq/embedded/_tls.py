"""Certificates for the embedded Kafka's TLS listener, made with the JDK's `keytool` (no other tool needed).

A throwaway CA signs the broker's certificate (subject alternative names 127.0.0.1 and localhost, so clients verify
the host name); clients trust the CA's PEM file. Everything lives in the broker's data folder and dies with it.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kmq.errors import EmbeddedBrokerError

_KEYTOOL_TIMEOUT_S = 120
_VALIDITY_DAYS = "2"
_SAN = "SAN=IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class BrokerCertificates:
    """The CA clients trust, and the broker's PKCS12 keystore (its key and the chain the CA signed)."""

    ca_file: Path
    keystore: Path
    password: str


def make_certificates(java: str, folder: Path, ca_name: str = "kmq-embedded-ca") -> BrokerCertificates:
    """A CA and a broker certificate it signed, in `folder` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    keytool, password = str(Path(java).with_name("keytool")), secrets.token_hex(16)
    ca_store, ca_file = folder / f"{ca_name}.p12", make_ca(java, folder, ca_name, password)
    keystore, request, signed = folder / "broker.p12", folder / "broker.csr", folder / "broker.pem"
    store = ["-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", password]
    _run(keytool, "-genkeypair", "-alias", "broker", "-dname", "CN=localhost", "-ext", _SAN, *_KEY, *store)
    _run(keytool, "-certreq", "-alias", "broker", "-file", str(request), *store)
    ca = ["-keystore", str(ca_store), "-storetype", "PKCS12", "-storepass", password]
    _run(keytool, "-gencert", "-alias", "ca", "-infile", str(request), "-outfile", str(signed), "-ext", _SAN, *ca)
    _run(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_file), *store)
    _run(keytool, "-importcert", "-noprompt", "-alias", "broker", "-file", str(signed), *store)
    return BrokerCertificates(ca_file, keystore, password)


def make_ca(java: str, folder: Path, name: str, password: str | None = None) -> Path:
    """A self-signed CA in `folder` (`<name>.p12`); returns its certificate's PEM file (`<name>.pem`)."""
    keytool, password = str(Path(java).with_name("keytool")), password or secrets.token_hex(16)
    store = ["-keystore", str(folder / f"{name}.p12"), "-storetype", "PKCS12", "-storepass", password]
    _run(keytool, "-genkeypair", "-alias", "ca", "-dname", f"CN={name}", "-ext", "bc:c", *_KEY, *store)
    pem = folder / f"{name}.pem"
    _run(keytool, "-exportcert", "-rfc", "-alias", "ca", "-file", str(pem), *store)
    return pem


_KEY = ["-keyalg", "RSA", "-keysize", "2048", "-validity", _VALIDITY_DAYS]


def _run(*argv: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_KEYTOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EmbeddedBrokerError(f"keytool {argv[1]} failed: {e}") from e
    if done.returncode != 0:
        raise EmbeddedBrokerError(f"keytool {argv[1]} failed:\n{done.stdout}{done.stderr}")
