"""Fixtures for the Azure SDK tests: a self-signed TLS certificate, a static bearer token, and `cairn serve`
processes on 127.0.0.1:0 stopped (SIGTERM) when the session ends: one on a data directory (`server`), and three
replicas on one throwaway PostgreSQL database (`replicas`).

The server binary is $CAIRN_BIN, else target/debug/cairn under the repository root (build it first:
`cargo build -p cairn -p cairn-testpg`).
"""

import base64
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


def cairn_binary() -> str:
    binary = os.environ.get("CAIRN_BIN") or str(REPO / "target" / "debug" / "cairn")
    if not pathlib.Path(binary).exists():
        pytest.fail(f"cairn binary not found at {binary}: run `cargo build -p cairn` or set CAIRN_BIN")
    return binary


class Process:
    """A `cairn serve` started with `args`: its URL once it listens, its stderr collected, stopped with SIGTERM."""

    def __init__(self, args: list[str]):
        self.process = subprocess.Popen(
            [cairn_binary(), "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stderr_lines: list[str] = []
        threading.Thread(target=lambda: self.stderr_lines.extend(self.process.stderr), daemon=True).start()
        self.url = None
        for line in self.process.stdout:
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1)
                break
        if self.url is None:
            self.process.wait(timeout=10)
            pytest.fail("cairn serve did not start:\n" + "".join(self.stderr_lines))
        threading.Thread(target=lambda: self.process.stdout.read(), daemon=True).start()

    def stop(self, token: str):
        """SIGTERM; the server must exit 0 without having logged the token."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        log = "".join(self.stderr_lines)
        assert code == 0, "cairn serve exited with %s:\n%s" % (code, log)
        assert token not in log


def tls_and_token(workdir: pathlib.Path) -> tuple[pathlib.Path, list[str], str]:
    """A certificate, a tokens file and the `cairn serve` arguments that use them (Local allowed in workdir)."""
    cert, key = write_self_signed(workdir)
    token = secrets.token_urlsafe(32)
    tokens = workdir / "tokens.txt"
    tokens.write_text(f"# the SDK test's static token\n{token}\n")
    # The tests' Local roots live in workdir; the server keeps its own files there out of Local's reach.
    args = ["--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key), "--tokens", str(tokens),
            "--retry-after", "1", "--local-root", str(workdir)]
    return cert, args, token


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("cairn")
    cert, args, token = tls_and_token(workdir)
    process = Process([*args, "--data-dir", str(workdir / "data")])
    try:
        yield Server(process.url, token, cert, workdir)
    finally:
        process.stop(token)


@pytest.fixture(scope="session")
def replicas(tmp_path_factory):
    """Three `cairn serve` replicas on one throwaway PostgreSQL database, with 3 s claims.

    The database comes from `cairn-testpg` ($CAIRN_TESTPG_BIN, else beside the cairn binary): it starts a cluster
    with initdb and pg_ctl as the Rust tests do, prints its URL and stops it when its stdin closes.
    """
    workdir = tmp_path_factory.mktemp("replicas")
    cert, args, token = tls_and_token(workdir)
    helper = os.environ.get("CAIRN_TESTPG_BIN") or str(pathlib.Path(cairn_binary()).parent / "cairn-testpg")
    if not pathlib.Path(helper).exists():
        pytest.fail(f"cairn-testpg not found at {helper}: run `cargo build -p cairn-testpg` or set CAIRN_TESTPG_BIN")
    database = subprocess.Popen([helper], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    url = database.stdout.readline().strip()
    if not url.startswith("postgres://"):
        database.wait(timeout=30)
        pytest.fail("cairn-testpg did not start PostgreSQL:\n" + database.stderr.read())
    key_file = workdir / "cairn.key"
    key_file.write_text(base64.b64encode(secrets.token_bytes(32)).decode() + "\n")
    key_file.chmod(0o600)
    servers: list[Process] = []
    try:
        for _ in range(3):
            servers.append(Process([*args, "--store", url, "--store-key-file", str(key_file), "--claim-ttl", "3"]))
        yield [Server(process.url, token, cert, workdir) for process in servers]
    finally:
        try:
            for process in servers:
                process.stop(token)
        finally:
            database.stdin.close()
            database.wait(timeout=60)
