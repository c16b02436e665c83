"""Mutual TLS on the distributed runtime: only processes with the deployment's certificates take part."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock
from support.cluster import Cluster

from agent_memory.agents import (
    RemoteCodeExecutor,
    RemoteExecutorUnavailable,
    RuntimeTLS,
    RuntimeTLSError,
    connect_executor_runtime,
    make_certificates,
)


@pytest.fixture
def deployment_tls(tmp_path: Path) -> RuntimeTLS:
    make_certificates(tmp_path / "tls", ["127.0.0.1", "localhost"])
    return RuntimeTLS.load(tmp_path / "tls")


@pytest.fixture
async def tls_cluster(tmp_path: Path, deployment_tls: RuntimeTLS) -> AsyncIterator[Cluster]:
    async with Cluster(tmp_path, workers=1, tls=deployment_tls) as c:
        yield c


async def run(client: object, cluster: Cluster, code: str) -> str:
    executor = RemoteCodeExecutor(client, user_id="alice", thread_id="t", address=cluster.address)  # type: ignore[arg-type]
    return (await executor.execute_code_blocks([CodeBlock(language="bash", code=code)], CancellationToken())).output


async def test_processes_with_the_deployments_certificates_run_code(tls_cluster: Cluster) -> None:
    assert (await run(tls_cluster.client, tls_cluster, "echo over tls")).strip() == "over tls"


async def test_a_process_without_certificates_cannot_have_code_run(tls_cluster: Cluster) -> None:
    with pytest.raises(RemoteExecutorUnavailable, match="AGENT_MEMORY_RUNTIME_TLS"):
        client = await connect_executor_runtime(tls_cluster.address, timeout_s=5)
        await run(client, tls_cluster, "touch plaintext-was-here")
    assert not list(tls_cluster.homes[0].glob("work/**/plaintext-was-here"))


async def test_a_certificate_of_another_authority_is_refused(tls_cluster: Cluster, tmp_path: Path) -> None:
    make_certificates(tmp_path / "other", ["127.0.0.1"])
    with pytest.raises(RemoteExecutorUnavailable):
        client = await connect_executor_runtime(tls_cluster.address, tls=RuntimeTLS.load(tmp_path / "other"),
                                                timeout_s=5)  # fmt: skip
        await run(client, tls_cluster, "touch stranger-was-here")
    assert not list(tls_cluster.homes[0].glob("work/**/stranger-was-here"))


def test_keys_are_private_and_a_new_certificate_keeps_the_authority(tmp_path: Path) -> None:
    first = make_certificates(tmp_path, ["10.0.0.5"])
    ca_before = (tmp_path / "ca.pem").read_bytes()
    make_certificates(tmp_path, ["worker-2.internal"])

    assert (tmp_path / "ca.pem").read_bytes() == ca_before  # certificates made earlier stay valid
    for key in (tmp_path / "node-key.pem", tmp_path / "ca-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(first) == 4


def test_missing_files_say_how_to_make_them(tmp_path: Path) -> None:
    with pytest.raises(RuntimeTLSError, match="agent-memory runtime certs"):
        RuntimeTLS.load(tmp_path / "nothing-here")
