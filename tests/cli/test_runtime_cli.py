"""``agent-memory runtime host|worker`` and ``chat --runtime``: code runs on executor worker processes."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.processes import marker_seconds, processes_with
from support.scripted_llm import ScriptedLLM, chat_env
from support.servers import free_port

from agent_memory.agents import shard_of

CLI = [sys.executable, "-m", "agent_memory.cli"]


def wait_for_line(proc: subprocess.Popen[str], text: str, limit_s: float = 60) -> None:
    """Read ``proc``'s stdout until a line holds ``text`` (in a thread: a silent process must not hang the test)."""
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in iter(stdout.readline, "")], daemon=True).start()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if text in lines.get(timeout=0.5):
                return
        except queue.Empty:
            if proc.poll() is not None:
                raise AssertionError(f"exited {proc.returncode} before printing {text!r}") from None
    raise AssertionError(f"no {text!r} within {limit_s} s")


class Deployment:
    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.env = env
        self.homes = [tmp_path / "worker-0", tmp_path / "worker-1"]
        self.procs: list[subprocess.Popen[str]] = []

    def start(self) -> None:
        host = subprocess.Popen([*CLI, "runtime", "host", "--listen", self.address], env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        self.procs.append(host)
        wait_for_line(host, "listening")
        for shard, home in enumerate(self.homes):
            worker = subprocess.Popen(
                [*CLI, "runtime", "worker", "--connect", self.address, "--shard", str(shard), "--shards", "2"],
                env={**self.env, "AGENT_MEMORY_HOME": str(home)}, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            self.procs.append(worker)
            wait_for_line(worker, "connected")

    def worker_of(self, user: str) -> subprocess.Popen[str]:
        return self.procs[1 + shard_of(user, 2)]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def deployment(scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path) -> Iterator[Deployment]:
    d = Deployment(chat_env(scripted_llm, database_url, tmp_path / "chat-home"), tmp_path)
    try:
        d.start()
        yield d
    finally:
        d.stop()


def chat(d: Deployment, user: str, message: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "chat", "--user", user, "--runtime", d.address, "--shards", "2", "-m", message],
                          env=d.env, capture_output=True, text=True, timeout=120)  # fmt: skip


def test_chat_runs_its_code_on_the_worker_of_the_users_shard(
    deployment: Deployment, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    scripted_llm.add("```bash\necho built > artifact.txt; cat artifact.txt\n```", "It printed built. TERMINATE")

    done = chat(deployment, "rt-alice", "build it")

    assert done.returncode == 0, done.stderr
    assert "built" in done.stdout
    worker_home = deployment.homes[shard_of("rt-alice", 2)]
    assert [p.read_text() for p in worker_home.glob("work/*/*/artifact.txt")] == ["built\n"]
    assert not (tmp_path / "chat-home" / "work").exists()  # nothing ran in the chat process


def test_killing_a_worker_mid_run_fails_that_turn_clearly_and_kills_its_code(
    deployment: Deployment, scripted_llm: ScriptedLLM
) -> None:
    marker = marker_seconds()
    scripted_llm.add(f"```bash\nsleep {marker}\n```", "unreachable. TERMINATE")
    turn = subprocess.Popen([*CLI, "chat", "--user", "rt-bob", "--runtime", deployment.address, "--shards", "2",
                             "-m", "run the long job"], env=deployment.env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while not processes_with(f"sleep {marker}"):  # another process's state: polled
        assert time.monotonic() < deadline and turn.poll() is None, "the code never started"
        time.sleep(0.05)
    deployment.worker_of("rt-bob").kill()

    out, err = turn.communicate(timeout=60)
    assert turn.returncode == 4, err
    assert "the run was lost" in out and "agent-memory runtime worker" in out
    deadline = time.monotonic() + 20
    while processes_with(f"sleep {marker}"):  # its sandbox dies with its worker
        assert time.monotonic() < deadline, "the worker's code outlived it"
        time.sleep(0.05)


def test_a_worker_refuses_a_shard_outside_the_range(deployment: Deployment) -> None:
    command = [*CLI, "runtime", "worker", "--connect", deployment.address, "--shard", "2", "--shards", "2"]
    done = subprocess.run(command, env=deployment.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--shard must be between 0 and 1" in done.stderr


def test_chat_without_a_reachable_host_says_so(scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path) -> None:
    env = chat_env(scripted_llm, database_url, tmp_path)
    done = subprocess.run([*CLI, "chat", "--user", "rt-carol", "--runtime", f"127.0.0.1:{free_port()}", "-m", "hi"],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "cannot reach the runtime host" in done.stderr
    assert os.environ.get("AGENT_MEMORY_RUNTIME") is None


def test_a_host_reachable_from_other_machines_refuses_to_start_without_tls(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path
) -> None:
    env = chat_env(scripted_llm, database_url, tmp_path / "home")
    done = subprocess.run([*CLI, "runtime", "host", "--listen", f"0.0.0.0:{free_port()}"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "--tls DIR" in done.stderr and "--insecure" in done.stderr


def test_with_tls_only_workers_holding_the_deployments_certificates_join(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path
) -> None:
    env = chat_env(scripted_llm, database_url, tmp_path / "home")
    certs = subprocess.run([*CLI, "runtime", "certs", "--out", str(tmp_path / "tls"), "--json"], env=env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert certs.returncode == 0 and "127.0.0.1" in json.loads(certs.stdout)["hosts"]
    address = f"127.0.0.1:{free_port()}"
    host = subprocess.Popen([*CLI, "runtime", "host", "--listen", address, "--tls", str(tmp_path / "tls")], env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_for_line(host, "listening")
        stranger = subprocess.run([*CLI, "runtime", "worker", "--connect", address], capture_output=True, text=True,
                                  env={**env, "AGENT_MEMORY_HOME": str(tmp_path / "w0")}, timeout=120)  # fmt: skip
        assert stranger.returncode == 2 and "--tls" in stderr_tail(stranger)
        member = subprocess.Popen([*CLI, "runtime", "worker", "--connect", address, "--tls", str(tmp_path / "tls")],
                                  env={**env, "AGENT_MEMORY_HOME": str(tmp_path / "w1")}, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            wait_for_line(member, "connected")
        finally:
            member.send_signal(signal.SIGTERM)
            member.wait(30)
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(30)


def stderr_tail(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr[-2000:]


def test_chat_with_remote_agents_runs_the_team_on_a_session_worker(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path
) -> None:
    env = chat_env(scripted_llm, database_url, tmp_path / "chat-home")
    address = f"127.0.0.1:{free_port()}"
    host = subprocess.Popen([*CLI, "runtime", "host", "--listen", address], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    procs = [host]
    try:
        wait_for_line(host, "listening")
        worker = subprocess.Popen([*CLI, "runtime", "worker", "--connect", address, "--role", "session"],
                                  env={**env, "AGENT_MEMORY_HOME": str(tmp_path / "session-worker")}, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        procs.append(worker)
        wait_for_line(worker, "session worker")
        scripted_llm.add("```bash\necho team ran remotely > where.txt; cat where.txt\n```", "Done. TERMINATE")
        done = subprocess.run([*CLI, "chat", "--user", "rt-dora", "--runtime", address, "--remote-agents", "-m",
                               "where do you run?"], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "team ran remotely" in done.stdout and "session workers" in done.stdout
        assert list((tmp_path / "session-worker").glob("work/*/*/where.txt"))
        assert not (tmp_path / "chat-home" / "work").exists()  # nothing ran in the chat process
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
