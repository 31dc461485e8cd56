"""Fixtures for the Azure SDK test: a self-signed TLS certificate, a static bearer token, and a
`cairn serve` process on 127.0.0.1:0 that is stopped (SIGTERM) when the session ends.

The server binary is $CAIRN_BIN, else target/debug/cairn under the repository root (build it first:
`cargo build -p cairn`).
"""

import datetime
import ipaddress
import os
import pathlib
import re
import secrets
import signal
import subprocess
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REPO = pathlib.Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"listening on (https://\S+)")


def write_self_signed(directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A P-256 certificate for localhost and 127.0.0.1, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / "cert.pem"
    key_path = directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class Server:
    def __init__(self, url: str, token: str, cert: pathlib.Path, workdir: pathlib.Path):
        self.url = url
        self.token = token
        self.cert = cert
        self.workdir = workdir


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cairn")
    cert, key = write_self_signed(workdir)
    token = secrets.token_urlsafe(32)
    tokens = workdir / "tokens.txt"
    tokens.write_text(f"# the SDK test's static token\n{token}\n")
    binary = os.environ.get("CAIRN_BIN") or str(REPO / "target" / "debug" / "cairn")
    if not pathlib.Path(binary).exists():
        pytest.fail(f"cairn binary not found at {binary}: run `cargo build -p cairn` or set CAIRN_BIN")
    process = subprocess.Popen(
        [
            binary, "serve",
            "--listen", "127.0.0.1:0",
            "--tls-cert", str(cert),
            "--tls-key", str(key),
            "--tokens", str(tokens),
            "--data-dir", str(workdir / "data"),
            "--retry-after", "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr_lines: list[str] = []
    threading.Thread(
        target=lambda: stderr_lines.extend(process.stderr), daemon=True
    ).start()
    url = None
    for line in process.stdout:
        match = LISTENING.search(line)
        if match:
            url = match.group(1)
            break
    if url is None:
        process.wait(timeout=10)
        pytest.fail("cairn serve did not start:\n" + "".join(stderr_lines))
    threading.Thread(target=lambda: process.stdout.read(), daemon=True).start()
    try:
        yield Server(url, token, cert, workdir)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        assert code == 0, "cairn serve exited with %s:\n%s" % (code, "".join(stderr_lines))
        # The token must never reach the server's log.
        assert token not in "".join(stderr_lines)
