"""Mutual TLS between the processes of a distributed deployment: runtime host, executor workers, chat and UI.

AutoGen's gRPC host accepts any process that reaches its port, and that process could then send a worker code to
run as any user. With TLS, every process shows a certificate signed by the deployment's own certificate authority
and checks the other side's, so only processes holding the deployment's key take part. ``agent-memory runtime
certs --out DIR --host NAME...`` makes the authority (once) and a certificate for the deployment's machines; the
same directory (``ca.pem``, ``node.pem``, ``node-key.pem``) is copied to every machine and named with ``--tls DIR``
or ``AGENT_MEMORY_RUNTIME_TLS``. The authority's key (``ca-key.pem``) stays where the certificates are made.

Example:
    >>> RuntimeTLS(directory=Path("/etc/agent-memory/tls")).cert.name
    'node.pem'
"""

from __future__ import annotations

import datetime
import importlib
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost

CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE = "ca.pem", "ca-key.pem", "node.pem", "node-key.pem"
TLS_ENV = "AGENT_MEMORY_RUNTIME_TLS"


class RuntimeTLSError(RuntimeError):
    """The TLS files are missing or unreadable: nothing is started without them."""


class RuntimeTLS(BaseModel):
    """A deployment's TLS directory: its authority's certificate and this machine's certificate and key."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / CA_FILE

    @property
    def cert(self) -> Path:
        return self.directory / CERT_FILE

    @property
    def key(self) -> Path:
        return self.directory / KEY_FILE

    @classmethod
    def load(cls, directory: str | Path) -> RuntimeTLS:
        """The TLS files of ``directory``, checked to exist and be readable."""
        tls = cls(directory=Path(directory).expanduser())
        for path in (tls.ca, tls.cert, tls.key):
            if not os.access(path, os.R_OK):
                raise RuntimeTLSError(
                    f"{path} is missing or unreadable. Make the deployment's certificates with `agent-memory runtime "
                    f"certs --out {tls.directory} --host <this machine's name or IP>` and copy the directory "
                    "(without ca-key.pem) to every machine"
                )
        return tls

    def _read(self) -> tuple[bytes, bytes, bytes]:
        return self.ca.read_bytes(), self.cert.read_bytes(), self.key.read_bytes()

    def server_credentials(self) -> Any:
        """The host's side: its certificate, and every client must show one signed by the authority."""
        grpc: Any = importlib.import_module("grpc")

        ca, cert, key = self._read()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)

    def channel_credentials(self) -> Any:
        """A client's side (worker, chat, UI): checks the host against the authority and shows its certificate."""
        grpc: Any = importlib.import_module("grpc")

        ca, cert, key = self._read()
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def tls_from_env() -> RuntimeTLS | None:
    """``AGENT_MEMORY_RUNTIME_TLS`` loaded, or ``None`` when it is not set."""
    directory = os.environ.get(TLS_ENV)
    return RuntimeTLS.load(directory) if directory else None


def runtime_host(address: str, tls: RuntimeTLS | None = None) -> GrpcWorkerAgentRuntimeHost:
    """AutoGen's gRPC host on ``address``; with ``tls``, it speaks only TLS and requires client certificates."""
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost

    if tls is None:
        return GrpcWorkerAgentRuntimeHost(address=address)
    credentials = tls.server_credentials()
    grpc: Any = importlib.import_module("grpc")
    from autogen_ext.runtimes.grpc._worker_runtime_host_servicer import GrpcWorkerAgentRuntimeHostServicer
    from autogen_ext.runtimes.grpc.protos import agent_worker_pb2_grpc

    class TLSRuntimeHost(GrpcWorkerAgentRuntimeHost):
        def __init__(self) -> None:  # AutoGen's constructor binds a plaintext port: this one binds a TLS port
            self._server = grpc.aio.server()
            self._servicer = GrpcWorkerAgentRuntimeHostServicer()
            agent_worker_pb2_grpc.add_AgentRpcServicer_to_server(self._servicer, self._server)
            self._server.add_secure_port(address, credentials)
            self._address = address
            self._serve_task = None

    return TLSRuntimeHost()


def make_certificates(directory: Path, hosts: list[str], *, days: int = 825) -> list[Path]:
    """Make the deployment's authority in ``directory`` (unless it is there) and a certificate and key for
    ``hosts`` (names or IP addresses the processes use to reach the host), for servers and clients alike."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_path, ca_key_path = directory / CA_FILE, directory / CA_KEY_FILE

    def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
        data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())  # fmt: skip
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    if ca_path.exists() and ca_key_path.exists():
        ca_cert = x509.load_pem_x509_certificate(ca_path.read_bytes())
        loaded = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise RuntimeTLSError(f"{ca_key_path} is not the key this command made")
        ca_key = loaded
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agent-memory runtime CA")])
        ca_cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )  # fmt: skip
        write_key(ca_key_path, ca_key)
        ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agent-memory runtime node")]))
        .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    write_key(directory / KEY_FILE, key)
    (directory / CERT_FILE).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return [ca_path, directory / CERT_FILE, directory / KEY_FILE, ca_key_path]
