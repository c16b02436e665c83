"""``agent-memory chat --user U``: a terminal chat with the CodeAgent + executor team.

Streams the team's events as they happen, with clear markers when memory is stored (``[memory stored]``),
read back by the agent (``[memory recall]``) or expanded by the context (``[memory expanded]``). Ctrl-C
cancels the running turn (a running command's whole process tree is killed) and returns to the prompt;
Ctrl-C at the prompt, Ctrl-D or ``/exit`` quits. ``--thread T`` resumes a thread (its MemoryContext is
reloaded from PostgreSQL). Without a terminal, lines are read from stdin; ``-m TEXT`` sends messages
non-interactively. ``--json`` prints one JSON object per event.

Examples::

    agent-memory chat --user alice
    agent-memory chat --user alice --thread build-42 -m "run the test suite and tell me what failed"
    agent-memory chat --user alice --spec team.json   # or the name of a spec in the agents table
    agent-memory agents save team.json && agent-memory agents list && agent-memory agents show code-team
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import threading
import uuid
import warnings
from typing import Any, TextIO

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    CodeExecutionEvent,
    ModelClientStreamingChunkEvent,
    TextMessage,
    ToolCallExecutionEvent,
    ToolCallRequestEvent,
)
from autogen_core import CancellationToken

from ..agents import (
    AgentBuilder,
    AgentSession,
    CodeProgressEvent,
    LocalSessions,
    MemoryContextEvent,
    MemoryStoredEvent,
    ModelConfigError,
    RemoteAgentSession,
    RemoteExecutorUnavailable,
    RuntimeTLS,
    RuntimeTLSError,
    TeamSpec,
    connect_executor_runtime,
)
from ..store import TeamSpecStore
from ..tools import MEMORY_TOOL_NAMES
from ._main import EXIT_NOT_FOUND, EXIT_OK, EXIT_TURN_FAILED, EXIT_USAGE, Cli, UsageError
from ._runtime import add_runtime_arguments

_EOF = object()


def _short(text: str, limit: int = 240) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def render_event(item: BaseAgentEvent | BaseChatMessage | TaskResult, *, user_source: str = "user") -> str | None:
    """The terminal line(s) for one event (None: nothing to show)."""
    if isinstance(item, TaskResult):
        return f"--- turn finished: {item.stop_reason or 'done'}"
    if isinstance(item, MemoryStoredEvent):
        return f"[memory stored] {item.memory_key}: {item.description} ({item.token_count} tokens)"
    if isinstance(item, MemoryContextEvent):
        detail = f" {item.detail}" if item.detail else ""
        return f"[memory {item.action}] {', '.join(item.memory_keys) or '-'}{detail}"
    if isinstance(item, ToolCallRequestEvent):
        lines = []
        for call in item.content:
            marker = "[memory recall]" if call.name in MEMORY_TOOL_NAMES else "[tool]"
            lines.append(f"{marker} {item.source} -> {call.name}({_short(call.arguments, 160)})")
        return "\n".join(lines)
    if isinstance(item, ToolCallExecutionEvent):
        return "\n".join(
            f"    {'error' if r.is_error else 'result'} {r.name}: {_short(r.content, 200)}" for r in item.content
        )
    if isinstance(item, CodeExecutionEvent | ModelClientStreamingChunkEvent):
        return None  # the executor's TextMessage says the same; chunks are printed by the caller
    if isinstance(item, TextMessage):
        if item.source == user_source:
            return None
        return f"{item.source}> {item.content.rstrip()}"
    if isinstance(item, BaseChatMessage):
        return f"{item.source}> {item.to_text()}"
    return f"[{item.source}] {item.to_text()}"


def event_json(item: BaseAgentEvent | BaseChatMessage | TaskResult) -> dict[str, Any]:
    if isinstance(item, TaskResult):
        return {"type": "TaskResult", "stop_reason": item.stop_reason}
    return dict(item.model_dump(mode="json"))


class ProgressPrinter:
    """Shows code that is still running: one line rewritten in place on a terminal; piped, a line now and then.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> printer = ProgressPrinter(out, tty=False)
        >>> printer.show(CodeProgressEvent(source="executor", elapsed_s=6.0, output_bytes=12, tail="step 1\\n"))
        >>> out.getvalue()
        '[running code 6 s, 12 bytes] step 1\\n'
    """

    FIRST_PIPED_S = 5.0  # piped output (logs, CI) gets no line for blocks that finish within seconds ...
    EVERY_PIPED_S = 10.0  # ... and one every 10 s for those that run longer

    def __init__(self, stream: TextIO, *, tty: bool) -> None:
        self.stream = stream
        self.tty = tty
        self._shown = False
        self._next_piped = self.FIRST_PIPED_S
        self._last_elapsed = 0.0

    def show(self, event: CodeProgressEvent) -> None:
        if event.elapsed_s < self._last_elapsed:  # a new run
            self._next_piped = self.FIRST_PIPED_S
        self._last_elapsed = event.elapsed_s
        last = event.tail.rstrip("\n").rsplit("\n", 1)[-1].strip() if event.tail.strip() else ""
        line = f"[running {'/'.join(event.languages) or 'code'} {event.elapsed_s:.0f} s, {event.output_bytes:,} bytes]"
        line += f" {last}" if last else ""
        if self.tty:
            width = shutil.get_terminal_size().columns
            self.stream.write("\r\x1b[K" + line[: max(width - 1, 20)])
            self.stream.flush()
            self._shown = True
        elif event.elapsed_s >= self._next_piped:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._next_piped = event.elapsed_s + self.EVERY_PIPED_S

    def clear(self) -> None:
        """Remove the in-place line before other output is printed."""
        if self._shown:
            self.stream.write("\r\x1b[K")
            self._shown = False


class _LineReader:
    """Reads stdin lines in a daemon thread (so Ctrl-C and exit never wait for a blocked ``input``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, prompt: str | None) -> None:
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self._loop = loop
        self._prompt = prompt
        self._wanted = threading.Event()
        threading.Thread(target=self._run, name="chat-stdin", daemon=True).start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            try:
                line: object = input(self._prompt) if self._prompt is not None else sys.stdin.readline()
                if line == "":
                    line = _EOF if self._prompt is None else ""
            except EOFError:
                line = _EOF
            self._loop.call_soon_threadsafe(self.queue.put_nowait, line)
            if line is _EOF:
                return

    async def next_line(self) -> object:
        self._wanted.set()
        return await self.queue.get()


async def _run_turn(session: AgentSession | RemoteAgentSession, text: str, cli: Cli, state: dict[str, Any]) -> bool:
    """One user turn; False when it failed (the chat goes on either way; a cancelled turn is not a failure)."""
    token = CancellationToken()
    state["token"] = token
    streaming = False
    progress = ProgressPrinter(sys.stdout, tty=sys.stdout.isatty())
    try:
        async for item in session.run_stream(text, cancellation_token=token):
            if cli.json:
                print(json.dumps(event_json(item), ensure_ascii=False, default=str), flush=True)
                continue
            if isinstance(item, CodeProgressEvent):
                progress.show(item)
                continue
            progress.clear()
            if isinstance(item, ModelClientStreamingChunkEvent):
                print(item.content, end="", flush=True)
                streaming = True
                continue
            if streaming:
                print()
                streaming = False
            line = render_event(item)
            if line:
                print(line, flush=True)
    except asyncio.CancelledError:
        progress.clear()
        if not token.is_cancelled():
            raise
        print("[cancelled] the turn was stopped; running commands were killed", flush=True)
        return True
    except Exception as exc:  # a model or tool failure ends the turn, not the chat
        progress.clear()
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if state.get("model_url") and any(word in message for word in ("Connection", "Timeout", "connect")):
            message = f"{message} (model server {state['model_url']}: is it running? OPENAI_BASE_URL sets it)"
        if cli.json:
            print(json.dumps({"type": "Error", "error": message}), flush=True)
        else:
            print(f"[error] the turn failed: {message}", flush=True)
        return False
    finally:
        state["token"] = None
    return True


async def cmd_chat(args: argparse.Namespace, cli: Cli) -> int:
    # AutoGen warns on every call when a server answers with another model name than it asked for (local
    # servers, proxies): noise on a terminal, where the user already chose the model.
    warnings.filterwarnings("ignore", message="Resolved model mismatch")
    user = cli.user()
    store = await cli.store()
    try:
        spec = await AgentBuilder.load_spec(store, args.spec)
    except LookupError as exc:
        raise UsageError(f"--spec {args.spec!r} is neither a file nor a spec name in the agents table") from exc
    if args.max_turns is not None:
        spec = spec.model_copy(update={"max_turns": args.max_turns})
    executor_runtime = None
    if args.runtime:  # code runs on the executor workers of that runtime, never here
        try:
            tls = RuntimeTLS.load(args.runtime_tls) if args.runtime_tls else None
            executor_runtime = await connect_executor_runtime(args.runtime, tls=tls)
        except (RemoteExecutorUnavailable, RuntimeTLSError) as exc:
            raise UsageError(str(exc)) from exc
    session: AgentSession | RemoteAgentSession
    model_client: Any = None
    local_sessions = LocalSessions()
    if args.remote_agents:  # the agents run on the session workers (which have the model); only I/O here
        if executor_runtime is None:
            raise UsageError("--remote-agents needs --runtime HOST:PORT, the host of the session workers")
        session = RemoteAgentSession(executor_runtime, user_id=user, thread_id=args.thread or uuid.uuid4().hex,
                                     shards=args.session_shards, address=args.runtime)  # fmt: skip
    else:
        builder = AgentBuilder(store, user, spec=spec, executor_runtime=executor_runtime, executor_shards=args.shards)
        try:
            model_client = builder.build_model_client()
        except ModelConfigError as exc:
            cli.error(str(exc))
            return EXIT_USAGE
        # one machine: the same session actor as on a distributed runtime, on the in-process runtime
        session = await local_sessions.open(await builder.build(thread_id=args.thread))
    interactive = not args.message and sys.stdin.isatty()
    loop = asyncio.get_running_loop()
    # Named when the model server cannot be reached (OpenAI-compatible clients keep their base URL).
    model_url = getattr(getattr(model_client, "_client", None), "base_url", None)
    state: dict[str, Any] = {"token": None, "quit": False, "model_url": str(model_url) if model_url else None}
    quit_event = asyncio.Event()

    def on_sigint() -> None:
        token = state["token"]
        if token is not None:
            token.cancel()  # cancel the running turn, stay in the chat
        else:
            quit_event.set()

    with contextlib.suppress(NotImplementedError):  # (Windows has no add_signal_handler)
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    if not cli.json:
        print(
            f"agent-memory chat: user {user}, thread {session.thread_id}\n"
            + (
                f"the agents run on the session workers of {args.runtime}\n"
                if args.remote_agents
                else f"code runs on this machine in {session.work_dir or 'the executor'}\n"
            )
            + "Ctrl-C cancels a running turn; Ctrl-D, Ctrl-C at the prompt or /exit quits.",
            flush=True,
        )
    try:
        if args.message:
            failed = 0
            for text in args.message:
                if not cli.json:
                    print(f"you> {text}", flush=True)
                failed += not await _run_turn(session, text, cli, state)
            return EXIT_TURN_FAILED if failed else EXIT_OK
        reader = _LineReader(loop, "you> " if interactive else None)
        failed = 0
        while True:
            next_line = asyncio.ensure_future(reader.next_line())
            quit_wait = asyncio.ensure_future(quit_event.wait())
            done, _ = await asyncio.wait({next_line, quit_wait}, return_when=asyncio.FIRST_COMPLETED)
            if quit_wait in done:
                next_line.cancel()
                print()
                break
            quit_wait.cancel()
            line = next_line.result()
            if line is _EOF:
                break
            text = str(line).strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                break
            failed += not await _run_turn(session, text, cli, state)
        # Lines piped in are a batch: say whether it all worked. At a terminal the user saw each turn.
        return EXIT_TURN_FAILED if failed and not interactive else EXIT_OK
    finally:
        with contextlib.suppress(NotImplementedError):
            loop.remove_signal_handler(signal.SIGINT)
        await session.close()
        await local_sessions.stop()


async def cmd_agents_save(args: argparse.Namespace, cli: Cli) -> int:
    try:
        spec = TeamSpec.from_file(args.file)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the spec {args.file}: {exc}") from exc
    if args.name:
        spec = spec.model_copy(update={"name": args.name})
    await spec.save_to_db(await cli.store())
    cli.emit({"saved": spec.name}, f"saved spec {spec.name!r} (use: agent-memory chat --spec {spec.name})")
    return EXIT_OK


async def cmd_agents_list(args: argparse.Namespace, cli: Cli) -> int:
    rows = await TeamSpecStore((await cli.store()).db).summaries()
    data = [{"name": r["name"], "description": r["description"], "updated_at": r["updated_at"]} for r in rows]
    cli.emit(data, "\n".join(f"{r['name']:<30} {r['description']}" for r in rows) or "no specs")
    return EXIT_OK


async def cmd_agents_show(args: argparse.Namespace, cli: Cli) -> int:
    try:
        spec = await TeamSpec.from_db(await cli.store(), args.name)
    except LookupError:
        cli.error(f"no spec named {args.name!r} (agent-memory agents list)")
        return EXIT_NOT_FOUND
    cli.emit(spec.model_dump(mode="json"), spec.model_dump_json(indent=2))
    return EXIT_OK


def register(subparsers: Any) -> None:
    """Add ``chat`` (and ``agents`` for team specs in the database) to the ``agent-memory`` command."""
    agents = subparsers.add_parser("agents", help="team specs stored in the agents table (for chat --spec)")
    agents_sub = agents.add_subparsers(dest="agents_command", metavar="AGENTS_COMMAND")
    agents_sub.required = True
    a = agents_sub.add_parser("save", help="store a JSON/YAML team spec file under its name")
    a.add_argument("file")
    a.add_argument("--name", help="store under this name instead of the spec's own")
    a.add_argument("--json", action="store_true")
    a.set_defaults(handler=cmd_agents_save)
    a = agents_sub.add_parser("list", help="list stored team specs")
    a.add_argument("--json", action="store_true")
    a.set_defaults(handler=cmd_agents_list)
    a = agents_sub.add_parser("show", help="print a stored team spec")
    a.add_argument("name")
    a.add_argument("--json", action="store_true")
    a.set_defaults(handler=cmd_agents_show)

    p = subparsers.add_parser("chat", help="chat with the code agent team in the terminal (memory-backed)")
    p.add_argument("--thread", help="thread id to start or resume (default: a new thread)")
    p.add_argument("--spec", help="team spec: a JSON/YAML file, or the name of a spec in the agents table")
    p.add_argument("--max-turns", type=int, help="override the spec's maximum turns per user message")
    p.add_argument("--message", "-m", action="append", help="send this message and exit (repeatable)")
    p.add_argument("--user", "-u", help="user identifier (default: $AGENT_MEMORY_USER)")
    p.add_argument("--json", action="store_true", help="one JSON object per event")
    add_runtime_arguments(p, who="this chat's")
    p.add_argument(
        "--remote-agents",
        action="store_true",
        default=os.environ.get("AGENT_MEMORY_REMOTE_AGENTS", "").lower() in ("1", "true", "yes"),
        help="run the agents themselves on the session workers of --runtime ($AGENT_MEMORY_REMOTE_AGENTS)",
    )
    p.add_argument(
        "--session-shards",
        type=int,
        default=int(os.environ.get("AGENT_MEMORY_SESSION_SHARDS", "1")),
        help="how many session workers share the users ($AGENT_MEMORY_SESSION_SHARDS, default 1)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show AutoGen's log messages")
    p.set_defaults(handler=_chat_handler)


async def _chat_handler(args: argparse.Namespace, cli: Cli) -> int:
    if not args.verbose:
        # AutoGen logs a traceback for every cancelled turn; the chat reports cancellation itself.
        for name in ("autogen_core", "autogen_agentchat", "autogen_ext"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    return await cmd_chat(args, cli)
