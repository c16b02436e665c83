"""A scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

No LLM endpoint is reachable in tests, so the one stand-in we allow is this HTTP server: the real
``openai`` client (and AutoGen's ``OpenAIChatCompletionClient`` on top of it) talks to it over HTTP,
exactly as it would talk to OpenAI, vLLM or Ollama. Each request pops the next scripted reply; every
request body is recorded so tests can assert on what the model *actually received*.

It runs in a background thread (stdlib ``ThreadingHTTPServer``), so it works with any event loop and
with subprocesses (pass ``server.base_url`` as ``OPENAI_BASE_URL``).

Supported: ``POST /v1/chat/completions`` (plain JSON and ``stream: true`` server-sent events, with
``stream_options.include_usage``), text replies, tool calls (one or several), ``GET /v1/models``.
Like the real API it refuses (HTTP 400) a conversation whose tool messages do not answer the preceding
assistant tool calls, so an invalid call/result pairing fails loudly instead of passing silently.

Script entries are a :class:`Reply`, a plain string (text reply), or a callable
``(RecordedRequest) -> Reply | str`` that decides from the request (e.g. reads a memory key out of the
conversation and calls ``retrieve_memory`` with it). When the script is exhausted the server answers
HTTP 500 and records the problem in ``server.errors``.

Example (pytest; ``tests/conftest.py`` registers this module as a plugin, so every test can ask for the
``scripted_llm`` fixture)::

    from support.scripted_llm import Reply, ScriptedLLM

    async def test_hello(scripted_llm: ScriptedLLM):
        scripted_llm.add(Reply.tool_call("retrieve_memory", {"key": "cmd_1"}), "The answer is 42.")
        client = scripted_llm.model_client()          # AutoGen OpenAIChatCompletionClient over HTTP
        ...
        assert scripted_llm.requests[0].messages[0]["role"] == "system"
        assert scripted_llm.errors == []              # no refused or unscripted request

A subprocess (CLI, Chainlit app) uses it through the environment: ``OPENAI_BASE_URL=server.base_url``,
``OPENAI_API_KEY=anything``, ``AGENT_MEMORY_MODEL=gpt-4o``.

Example (plain Python, e.g. a benchmark)::

    with ScriptedLLM(["hi"]) as server:
        openai.OpenAI(base_url=server.base_url, api_key="x").chat.completions.create(...)
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from agent_memory.tokens import count_tokens

__all__ = ["RecordedRequest", "Reply", "ScriptedLLM", "ToolCall", "scripted_llm", "validate_tool_pairing"]


@dataclass(frozen=True)
class ToolCall:
    """One function call the scripted model makes."""

    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:16]}")


@dataclass(frozen=True)
class Reply:
    """What the scripted model answers: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @classmethod
    def text(cls, content: str) -> Reply:
        return cls(content=content)

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any] | None = None, *, call_id: str | None = None) -> Reply:
        call = ToolCall(name, arguments or {}) if call_id is None else ToolCall(name, arguments or {}, call_id)
        return cls(tool_calls=(call,))

    @classmethod
    def tool_calls_(cls, *calls: ToolCall) -> Reply:
        return cls(tool_calls=tuple(calls))

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    path: str
    body: dict[str, Any]
    raw: bytes
    headers: dict[str, str]
    prompt_tokens: int = 0
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def text(self) -> str:
        """The whole request body as text (what "the model received" in the widest sense)."""
        return self.raw.decode("utf-8")

    def contents(self) -> list[str]:
        """Every message's text content (multi-part contents flattened)."""
        out: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
        return out

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools", []) or []]


ScriptEntry = Reply | str | Callable[[RecordedRequest], "Reply | str"]


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens of a request, counted like OpenAI does for chat (content + 4 per message + tools)."""
    total = 3
    for message in body.get("messages", []):
        total += 4
        content = message.get("content")
        if isinstance(content, str):
            total += count_tokens(content)
        elif isinstance(content, list):
            total += sum(count_tokens(str(p.get("text", ""))) for p in content if isinstance(p, dict))
        for call in message.get("tool_calls", []) or []:
            total += count_tokens(call["function"]["name"]) + count_tokens(call["function"]["arguments"])
    if body.get("tools"):
        total += count_tokens(json.dumps(body["tools"]))
    return total


def validate_tool_pairing(messages: list[dict[str, Any]]) -> list[str]:
    """Problems the OpenAI API would reject: tool messages without a matching preceding call, or
    assistant tool calls not answered by tool messages before the next non-tool message."""
    problems: list[str] = []
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                problems.append(f"message {i}: tool result {call_id!r} does not answer a preceding tool call")
            pending.discard(call_id)
            continue
        if pending:
            problems.append(f"message {i}: tool calls {sorted(pending)} were never answered")
            pending = set()
        if role == "assistant":
            pending = {c["id"] for c in message.get("tool_calls", []) or []}
    if pending:
        problems.append(f"tool calls {sorted(pending)} at the end of the conversation were never answered")
    return problems


class ScriptedLLM:
    """The server. Start with ``start()`` or ``with``; ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    def __init__(self, script: Iterable[ScriptEntry] = (), *, model: str = "gpt-4o") -> None:
        self.model = model
        self.answer_model: str | None = None  # answer with this model name (a proxy or local server renaming it)
        self._script: deque[ScriptEntry] = deque(script)
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ScriptedLLM:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError as exc:
                    self._json(400, {"error": {"message": f"invalid JSON: {exc}"}})
                    return
                status, payload, stream = server._handle(self.path, body, raw, dict(self.headers))
                if stream is not None and status == 200:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    for chunk in stream:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    self.close_connection = True
                else:
                    self._json(status, payload)

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedLLM is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # ------------------------------------------------------------------ script

    def add(self, *entries: ScriptEntry) -> None:
        """Append replies to the script (FIFO)."""
        with self._lock:
            self._script.extend(entries)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def model_client(self, **kwargs: Any) -> Any:
        """An AutoGen ``OpenAIChatCompletionClient`` pointed at this server."""
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        kwargs.setdefault("model", self.model)
        kwargs.setdefault("api_key", "test-key")
        return OpenAIChatCompletionClient(base_url=self.base_url, **kwargs)

    # ------------------------------------------------------------------ handling

    def _handle(
        self, path: str, body: dict[str, Any], raw: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], Iterator[dict[str, Any]] | None]:
        request = RecordedRequest(path=path, body=body, raw=raw, headers=headers)
        request.prompt_tokens = count_prompt_tokens(body)
        problems = validate_tool_pairing(request.messages)
        with self._lock:
            self.requests.append(request)
            if problems:
                self.errors.extend(problems)
                return 400, {"error": {"message": "; ".join(problems), "type": "invalid_request_error"}}, None
            if not self._script:
                message = f"script exhausted at request {len(self.requests)}"
                self.errors.append(message)
                return 500, {"error": {"message": message, "type": "server_error"}}, None
            entry = self._script.popleft()
        try:
            reply = entry(request) if callable(entry) else entry
        except Exception as exc:  # a broken responder must show up in the test, not hang it
            with self._lock:
                self.errors.append(f"responder failed: {exc!r}")
            return 500, {"error": {"message": f"responder failed: {exc!r}"}}, None
        if isinstance(reply, str):
            reply = Reply.text(reply)
        request.reply = reply
        model = self.answer_model or _resolved_model_name(str(body.get("model") or self.model))
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        created = int(time.time())
        usage = {
            "prompt_tokens": request.prompt_tokens,
            "completion_tokens": count_tokens(reply.content or "")
            + sum(count_tokens(json.dumps(c.arguments)) for c in reply.tool_calls),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return 200, {}, _stream_chunks(reply, model, completion_id, created, usage if include_usage else None)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in reply.tool_calls
            ]
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": usage,
        }
        return 200, payload, None


def _resolved_model_name(model: str) -> str:
    """The dated name OpenAI answers with (AutoGen warns when the answer does not match its mapping)."""
    try:
        from autogen_ext.models.openai._model_info import resolve_model

        return str(resolve_model(model))
    except Exception:
        return model


def _stream_chunks(
    reply: Reply, model: str, completion_id: str, created: int, usage: dict[str, int] | None
) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    yield chunk({"role": "assistant", "content": ""})
    text = reply.content or ""
    step = max(1, len(text) // 4)
    for start in range(0, len(text), step):
        yield chunk({"content": text[start : start + step]})
    for index, call in enumerate(reply.tool_calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                ]
            }
        )
    yield chunk({}, reply.finish_reason)
    if usage is not None:
        yield {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A started :class:`ScriptedLLM` (empty script; ``add`` replies), stopped after the test."""
    server = ScriptedLLM().start()
    try:
        yield server
    finally:
        server.stop()


def chat_env(server: ScriptedLLM, database_url: str, home: Path) -> dict[str, str]:
    """The environment of an `agent-memory` subprocess that talks to ``server`` and the test database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_MEMORY_MODEL"))}
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="test-key",
        AGENT_MEMORY_MODEL="gpt-4o",
        AGENT_MEMORY_DATABASE_URL=database_url,
        AGENT_MEMORY_HOME=str(home),
    )
    return env
