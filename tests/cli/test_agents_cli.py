"""``agent-memory chat`` as a user runs it: a real subprocess, real PostgreSQL, the scripted model over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from support.scripted_llm import Reply, ScriptedLLM, chat_env

from agent_memory import MemoryStore
from agent_memory.placeholders import parse_memory_refs


def run_chat(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", "chat", *args],
        input=stdin, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_chat_streams_events_with_memory_markers(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str
) -> None:
    scripted_llm.add(
        "```bash\nseq 1 5000\n```",
        lambda req: Reply.tool_call(
            "retrieve_memory", {"key": parse_memory_refs(req.contents()[-1])[-1].key, "grep": "^4242$"}
        ),
        "Line 4242 is there. TERMINATE",
    )

    done = run_chat(["--user", user_id, "-m", "count to 5000"], chat_env(scripted_llm, database_url, tmp_path))

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "[memory stored] cmd_" in out
    assert "[memory recall] coder -> retrieve_memory(" in out
    assert "coder> Line 4242 is there. TERMINATE" in out
    assert "--- turn finished" in out
    assert "\n2500\n" not in out  # the raw output is never printed (only its excerpt: head and tail)


def test_a_server_answering_with_another_model_name_prints_no_warning(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str
) -> None:
    scripted_llm.answer_model = "llama-3.1-8b-instruct-q4"  # what local servers and proxies often do
    scripted_llm.add("Hello. TERMINATE", "Again. TERMINATE")

    done = run_chat(["--user", user_id, "-m", "hi", "-m", "hi again"], chat_env(scripted_llm, database_url, tmp_path))

    assert done.returncode == 0, done.stderr
    assert "coder> Again. TERMINATE" in done.stdout
    assert "mismatch" not in done.stderr.lower() and "warning" not in done.stderr.lower(), done.stderr


def test_chat_reads_stdin_lines_and_json_mode_emits_one_object_per_event(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str
) -> None:
    scripted_llm.add("Hello! TERMINATE", "Still here. TERMINATE")

    done = run_chat(["--user", user_id, "--json"], chat_env(scripted_llm, database_url, tmp_path), stdin="hi\nagain\n")

    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    texts = [e.get("content") for e in events if e.get("type") == "TextMessage"]
    assert texts == ["hi", "Hello! TERMINATE", "again", "Still here. TERMINATE"]
    assert [e["type"] for e in events].count("TaskResult") == 2


def test_chat_without_model_configuration_says_what_to_set(database_url: str, tmp_path: Path, user_id: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_MEMORY_MODEL"))}
    env.update(AGENT_MEMORY_DATABASE_URL=database_url, AGENT_MEMORY_HOME=str(tmp_path))

    done = run_chat(["--user", user_id, "-m", "hi"], env)

    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr
    assert "AGENT_MEMORY_MODEL_CONFIG" in done.stderr


def test_chat_needs_a_user(database_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_USER"}
    env.update(AGENT_MEMORY_DATABASE_URL=database_url, AGENT_MEMORY_HOME=str(tmp_path))

    done = run_chat(["-m", "hi"], env)

    assert done.returncode == 2
    assert "--user" in done.stderr


async def test_ctrl_c_cancels_the_running_turn_and_kills_the_command(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str, store: MemoryStore
) -> None:
    marker = f"{800 + uuid.uuid4().int % 9000}.{uuid.uuid4().int % 1000:03d}"
    scripted_llm.add(f"```bash\nsleep {marker} &\nsleep {marker}\n```", "Back after the cancel. TERMINATE")
    proc = subprocess.Popen(  # noqa: ASYNC220 (driven with communicate() in a thread below)
        [sys.executable, "-m", "agent_memory.cli", "chat", "--user", user_id],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=chat_env(scripted_llm, database_url, tmp_path),
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write("start the long job\n")
    proc.stdin.flush()

    def sleepers() -> list[str]:
        out = subprocess.run(["ps", "-ww", "-eo", "stat=,args="], capture_output=True, text=True).stdout
        return [ln for ln in out.splitlines() if f"sleep {marker}" in ln and not ln.lstrip().startswith("Z")]

    deadline = time.monotonic() + 60
    while len(sleepers()) < 2:  # polling: a process appearing is not something we can await
        assert time.monotonic() < deadline, "the command never started"
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = await asyncio.to_thread(proc.communicate, "are you there?\n", 60)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert proc.returncode == 0, err
    assert "[cancelled]" in out
    assert "coder> Back after the cancel. TERMINATE" in out
    assert sleepers() == []


def test_a_failed_turn_is_reported_and_the_chat_goes_on(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str
) -> None:
    failing = [lambda req: 1 / 0] * 3  # HTTP 500 for the first call and the openai client's 2 retries
    scripted_llm.add(*failing, "Recovered. TERMINATE")
    env = chat_env(scripted_llm, database_url, tmp_path)

    done = run_chat(["--user", user_id, "-m", "first", "-m", "second"], env)

    assert done.returncode == 4, done.stderr  # the batch did not all work: not 0
    assert "[error] the turn failed:" in done.stdout
    assert done.stdout.index("[error] the turn failed:") < done.stdout.index("you> second")
    assert "coder> Recovered. TERMINATE" in done.stdout


def test_a_model_server_that_cannot_be_reached_fails_the_command_and_names_the_url(
    database_url: str, tmp_path: Path, user_id: str
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_MEMORY_MODEL"))}
    env.update(OPENAI_BASE_URL=closed, OPENAI_API_KEY="k", AGENT_MEMORY_MODEL="gpt-4o",
               AGENT_MEMORY_DATABASE_URL=database_url, AGENT_MEMORY_HOME=str(tmp_path))  # fmt: skip

    done = run_chat(["--user", user_id, "-m", "hello"], env)

    assert done.returncode == 4
    assert "[error] the turn failed:" in done.stdout and closed in done.stdout.replace(closed + "/", closed)


def test_agents_commands_save_list_and_show_specs_used_by_chat(
    scripted_llm: ScriptedLLM, database_url: str, tmp_path: Path, user_id: str
) -> None:
    name = f"spec-{uuid.uuid4().hex[:8]}"
    spec_file = tmp_path / "team.json"
    spec_file.write_text(json.dumps({"name": name, "code_agent": {"extra_instructions": "Always answer in haiku."}}))
    env = chat_env(scripted_llm, database_url, tmp_path)
    cli = [sys.executable, "-m", "agent_memory.cli", "agents"]

    saved = subprocess.run([*cli, "save", str(spec_file)], capture_output=True, text=True, env=env, timeout=60)
    listed = subprocess.run([*cli, "list", "--json"], capture_output=True, text=True, env=env, timeout=60)
    missing = subprocess.run([*cli, "show", "no-such-spec"], capture_output=True, text=True, env=env, timeout=60)
    scripted_llm.add("Old pond, frog jumps in. TERMINATE")
    chat = run_chat(["--user", user_id, "--spec", name, "-m", "hi"], env)

    assert saved.returncode == 0, saved.stderr
    assert name in [row["name"] for row in json.loads(listed.stdout)]
    assert missing.returncode == 1
    assert chat.returncode == 0, chat.stderr
    assert "Always answer in haiku." in scripted_llm.requests[0].messages[0]["content"]
