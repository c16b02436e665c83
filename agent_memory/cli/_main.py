"""The ``agent-memory`` command: inspect and manage memory from a shell.

Every command takes ``--user`` (or ``AGENT_MEMORY_USER``) and ``--json`` for machine output.
Exit codes: 0 ok, 1 not found, 2 usage or bad input, 3 database unavailable.

Examples::

    agent-memory store build.log --user alice --description "npm install log" --type command_output
    agent-memory retrieve cmd_1a2b3c4d5e6f --user alice --grep "ERR!" --context 2
    agent-memory search "disk full" --user alice --json
    agent-memory db status

Other modules add commands by exposing ``register(subparsers)`` and being listed, with the command names
they add, in ``COMMAND_PROVIDERS``; a command sets ``handler=<async fn(args, cli) -> int>`` with ``set_defaults``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from ..config import get_settings
from ..errors import DatabaseUnavailable, MemoryNotFound
from ..models import MemoryItem
from ..search import EmbeddingError
from ..store import MemoryStore

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_DB = 0, 1, 2, 3
EXIT_TURN_FAILED = 4  # the command ran but its work failed (a chat turn's model or tool call)
EXIT_TERMINATED = 128 + int(signal.SIGTERM)  # what a shell reports for a process ended by SIGTERM
TERMINATE_GRACE_S = 5.0  # after SIGTERM, how long the command may take to wind down

# "module:function" -> the commands that function adds to the subparsers. A provider is imported only when
# one of its commands runs (or for --help / an unknown command), so core commands such as `retrieve` do not
# pay for importing AutoGen, MCP or Chainlit.
COMMAND_PROVIDERS: dict[str, tuple[str, ...]] = {
    "agent_memory.cli._mcp:register": ("mcp", "token"),
    "agent_memory.cli._ui:register": ("ui", "user"),
    "agent_memory.cli._reindex:register": ("reindex",),
    "agent_memory.cli._skills:register": ("skills",),
    "agent_memory.cli._chat:register": ("chat", "agents"),
    "agent_memory.cli._lifecycle:register": ("update", "history", "retract", "export", "import", "audit", "purge"),
    "agent_memory.cli._runtime:register": ("runtime",),
}

Handler = Callable[[argparse.Namespace, "Cli"], Awaitable[int]]


class UsageError(Exception):
    """Bad command-line input (exit code 2)."""


class Cli:
    """What a command handler needs: the parsed args, a store, and output helpers honouring ``--json``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._store: MemoryStore | None = None

    @property
    def json(self) -> bool:
        return bool(getattr(self.args, "json", False))

    def user(self) -> str:
        user = getattr(self.args, "user", None) or os.environ.get("AGENT_MEMORY_USER")
        if not user:
            raise UsageError("no user given: pass --user NAME (or set AGENT_MEMORY_USER)")
        return str(user)

    async def store(self) -> MemoryStore:
        if self._store is None:
            self._store = await MemoryStore.open()
        return self._store

    async def close(self) -> None:
        if self._store is not None:
            await self._store.close()

    def emit(self, data: Any, text: str | None = None) -> None:
        """Print ``data`` as JSON with ``--json``, else ``text`` (or a readable rendering of ``data``)."""
        # Flushed: long-running commands (runtime host/worker, ui) report readiness to whoever reads a pipe.
        if self.json:
            print(json.dumps(data, default=_json_default, ensure_ascii=False, indent=2), flush=True)
        elif text is not None:
            print(text, flush=True)
        else:
            print(data, flush=True)

    def error(self, message: str) -> None:
        if self.json:
            print(json.dumps({"error": message}), file=sys.stderr)
        else:
            print(f"agent-memory: error: {message}", file=sys.stderr)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def item_line(item: MemoryItem) -> str:
    score = f"  score={item.score:.4f}" if item.score is not None else ""
    when = item.created_at.strftime("%Y-%m-%d %H:%M")
    status = "" if item.status == "held" else f"  [{item.status}]"
    return (
        f"{item.memory_key}  {item.memory_type:<15} {item.token_count:>8} tok  {when}  {item.description}{score}"
        f"{status}"
    )


# ---------------------------------------------------------------------------------------------- commands


def _read_input(path: str | None) -> tuple[bytes, str]:
    if path in (None, "-"):
        return sys.stdin.buffer.read(), "stdin"
    assert path is not None
    try:
        with open(path, "rb") as fh:
            return fh.read(), path
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc


async def cmd_store(args: argparse.Namespace, cli: Cli) -> int:
    raw, source = await asyncio.to_thread(_read_input, args.file)
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source} is not valid UTF-8 (byte {exc.start}); agent-memory stores text exactly and refuses "
            "binary data. Convert it first (e.g. base64)."
        ) from exc
    metadata: dict[str, Any] = {"source": source}
    if args.metadata:
        try:
            extra = json.loads(args.metadata)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--metadata is not valid JSON: {exc}") from exc
        if not isinstance(extra, dict):
            raise UsageError("--metadata must be a JSON object")
        metadata.update(extra)
    description = args.description
    if description is None:  # what listings and placeholders show: the file name and first line, the size
        from ..context import describe

        description = describe(content, kind=None if source == "stdin" else os.path.basename(source))
    store = await cli.store()
    key = await store.store(
        content, user_id=cli.user(), description=description, memory_type=args.type,
        agent_id=args.agent, thread_id=args.thread, metadata=metadata, actor=cli.user(), surface="cli",
    )  # fmt: skip
    if cli.json:
        item = await store.get(key, user_id=cli.user())
        cli.emit(item.model_dump(mode="json"))
    else:
        print(key)
    return EXIT_OK


async def cmd_retrieve(args: argparse.Namespace, cli: Cli) -> int:
    store = await cli.store()
    if args.version is not None:  # an earlier version, exact; views apply to it as to the current one
        from ..store import apply_transforms

        full = await store.retrieve_version(args.key, args.version, user_id=cli.user())
        text = apply_transforms(
            full, head=args.head, tail=args.tail, lines=args.lines, grep=args.grep, context=args.context,
            ignore_case=args.ignore_case, max_matches=args.max_matches,
        )  # fmt: skip
    else:
        text = await store.retrieve(
            args.key, user_id=cli.user(), head=args.head, tail=args.tail, lines=args.lines, grep=args.grep,
            context=args.context, ignore_case=args.ignore_case, max_matches=args.max_matches,
        )  # fmt: skip
    if cli.json:
        item = await store.get(args.key, user_id=cli.user())
        cli.emit({**item.model_dump(mode="json"), "content": text})
    else:
        # Byte-exact: write the UTF-8 bytes ourselves (no newline translation, no added newline). Only grep's
        # numbered excerpt, which is not a slice of the content, gets a final newline like grep's own output.
        if args.grep is not None and text and not text.endswith("\n"):
            text += "\n"
        if args.grep is not None and not text:
            print(f"no line matches {args.grep!r}", file=sys.stderr)
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.buffer.flush()
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, cli: Cli) -> int:
    item = await (await cli.store()).get(args.key, user_id=cli.user())
    cli.emit(item.model_dump(mode="json"), _item_details(item))
    return EXIT_OK


def _item_details(item: MemoryItem) -> str:
    """``show`` for people: one field a line, the metadata as indented JSON."""
    accessed = item.last_accessed_at.isoformat(timespec="seconds") if item.last_accessed_at else "never"
    fields = [
        ("key", item.memory_key),
        ("type", item.memory_type),
        ("description", item.description or "—"),
        ("size", f"{item.token_count:,} tokens, {item.char_count:,} characters"),
        ("created", item.created_at.isoformat(timespec="seconds")),
        ("last read", f"{accessed} ({item.access_count} reads)"),
        ("thread", item.thread_id or "—"),
        ("agent", item.agent_id or "—"),
        ("sha256", item.content_sha256),
    ]
    lines = [f"{name + ':':<13}{value}" for name, value in fields]
    if item.metadata:
        lines.append(
            "metadata:    " + json.dumps(item.metadata, indent=2, ensure_ascii=False).replace("\n", "\n" + " " * 13)
        )
    return "\n".join(lines)


async def cmd_search(args: argparse.Namespace, cli: Cli) -> int:
    items = await (await cli.store()).search(args.query, user_id=cli.user(), limit=args.limit, memory_type=args.type)
    cli.emit([i.model_dump(mode="json") for i in items], "\n".join(item_line(i) for i in items) or "no matches")
    return EXIT_OK


async def cmd_list(args: argparse.Namespace, cli: Cli) -> int:
    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since)
        except ValueError:
            from ..tools import parse_since  # a relative age, as the MCP tool takes it

            try:
                since = parse_since(args.since)
            except ValueError:
                raise UsageError(
                    f"--since must be an ISO date/time such as 2026-01-31 or 2026-01-31T12:00 (local time), "
                    f"or an age such as 30m, 24h, 7d, 2w; got {args.since!r}"
                ) from None
        if since is not None and since.tzinfo is None:
            since = since.astimezone()
    as_of = None
    if args.as_of:
        try:
            as_of = datetime.fromisoformat(args.as_of)
        except ValueError:
            raise UsageError(f"--as-of must be an ISO date/time such as 2026-01-31T12:00, got {args.as_of!r}") from None
        as_of = as_of if as_of.tzinfo else as_of.astimezone()
    items = await (await cli.store()).list(
        user_id=cli.user(), memory_type=args.type, thread_id=args.thread, agent_id=args.agent, since=since,
        limit=args.limit, offset=args.offset, as_of=as_of,
    )  # fmt: skip
    cli.emit([i.model_dump(mode="json") for i in items], "\n".join(item_line(i) for i in items) or "no memories")
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, cli: Cli) -> int:
    await (await cli.store()).delete(args.key, user_id=cli.user())
    cli.emit({"deleted": args.key}, f"deleted {args.key}")
    return EXIT_OK


def _memories(count: int) -> str:
    return "memory  " if count == 1 else "memories"  # padded: the columns stay aligned


async def cmd_stats(args: argparse.Namespace, cli: Cli) -> int:
    stats = await (await cli.store()).stats(user_id=cli.user())
    lines = [
        f"{t:<20} {v['count']:>7} {_memories(v['count'])} {v['tokens']:>10} tokens" for t, v in stats.by_type.items()
    ]
    lines.append(
        f"{'total':<20} {stats.total_memories:>7} {_memories(stats.total_memories)} {stats.total_tokens:>10} tokens"
    )
    cli.emit(stats.model_dump(mode="json"), "\n".join(lines))
    return EXIT_OK


async def cmd_forget_user(args: argparse.Namespace, cli: Cli) -> int:
    user = cli.user()
    if not args.yes:
        raise UsageError(f"this deletes every memory and thread of {user!r}; re-run with --yes to confirm")
    from ..agents import forget_user_files  # the agents (AutoGen) load only for this command

    store = await cli.store()
    receipt = await store.forget_user_receipt(user, surface="cli")
    files = await asyncio.to_thread(forget_user_files, get_settings().resolved_home(), user)
    if not receipt and not files.directories:
        cli.error(f"no user {user!r} in this database and no files of theirs: nothing to forget")
        return EXIT_NOT_FOUND
    count = receipt.get("memories", 0)
    lines = [f"forgot {user}:", f"  {count} memor{'y' if count == 1 else 'ies'} deleted"]
    lines += [f"  {n} {name.replace('_', ' ')} deleted" for name, n in receipt.items() if name != "memories" and n]
    lines += [f"  removed {d} ({files.files} files, {files.bytes} bytes)" for d in files.directories]
    if files.released_uid is not None:
        lines.append(f"  released sandbox uid {files.released_uid}")
    data = {"user": user, "deleted_memories": count, "deleted_rows": receipt, "removed_files": files.model_dump()}
    cli.emit(data, "\n".join(lines))
    return EXIT_OK


async def cmd_db_status(args: argparse.Namespace, cli: Cli) -> int:
    from ..agents import isolation_report  # the agents (AutoGen) load only for this command

    store = await cli.store()
    status = await store.db.status()
    status["vectors"] = await _vector_status(store)
    isolation = await asyncio.to_thread(isolation_report)
    status["isolation"] = {"available": isolation.available, "mode": isolation.mode, "detail": isolation.detail}
    if status["pgvector"]:
        vector = "pgvector enabled"
    elif status["pgvector_available"]:
        vector = "pgvector available, not enabled"
    else:
        vector = "pgvector not installed: search is lexical only"
    text = "\n".join(
        [
            f"database:       {status['url']}" + (" (embedded)" if status["embedded"] else ""),
            f"server:         PostgreSQL {status['server_version']}",
            f"schema version: {status['schema_version']}",
            f"vector search:  {vector}",
            "memories table: "
            + (f"partitioned by user in {status['partitions']}" if status["partitions"] else "one table"),
            f"users:          {status['users']}",
            f"memories:       {status['memories']} ({status['stored_tokens']} tokens stored)",
            f"vectors:        {_vector_line(status['vectors'])}",
            "code isolation: "
            + (f"bubblewrap, {isolation.mode}" if isolation.available else f"NOT AVAILABLE: {isolation.detail}"),
        ]
    )
    cli.emit(status, text)
    return EXIT_OK


async def _vector_status(store: MemoryStore) -> dict[str, Any]:
    """The configured embedder's vector space and how many active memories lack a current vector in it."""
    service = store.embeddings
    if service is None:
        return {"embedder": None, "missing": None, "error": None}
    name = service.embedder.model_name
    if not service.available:
        return {"embedder": name, "missing": None, "error": "the database has no pgvector extension"}
    try:
        missing = await store.count_unembedded()
    except EmbeddingError as exc:  # e.g. an embedding endpoint that is down cannot name its dimension
        return {"embedder": name, "missing": None, "error": str(exc)}
    return {"embedder": service.embedder.model_id, "missing": missing, "error": None}


def _vector_line(vectors: dict[str, Any]) -> str:
    if vectors["embedder"] is None:
        return "none: no embedder is configured (AGENT_MEMORY_EMBEDDER), search is lexical"
    if vectors["error"] is not None:
        return f"unknown for {vectors['embedder']}: {vectors['error']}"
    if vectors["missing"] == 0:
        return f"every memory has one ({vectors['embedder']})"
    return f"{vectors['missing']} memories lack one of {vectors['embedder']}: `agent-memory reindex` builds them"


# ---------------------------------------------------------------------------------------------- parser


def _common(parser: argparse.ArgumentParser, *, user: bool = True) -> None:
    if user:
        parser.add_argument("--user", "-u", help="user identifier (default: $AGENT_MEMORY_USER)")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _plain_command(sub: Any, name: str, handler: Handler, help_text: str, *positionals: str) -> None:
    """A subcommand with only positional arguments besides ``--user`` and ``--json``."""
    p = sub.add_parser(name, help=help_text)
    for positional in positionals:
        p.add_argument(positional)
    _common(p)
    p.set_defaults(handler=handler)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``command``, only the providers needed to parse that command are imported."""
    parser = argparse.ArgumentParser(
        prog="agent-memory",
        description="Inspect and manage agent-memory: exact storage of large agent outputs, per user.",
        epilog="Exit codes: 0 ok, 1 not found, 2 usage or bad input, 3 database unavailable.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("store", help="store a file (or stdin) exactly; prints the key")
    p.add_argument("file", nargs="?", help="file to store (default or '-': stdin)")
    p.add_argument(
        "--description",
        "-d",
        help="short description shown in listings and placeholders (default: file name, first line, size)",
    )
    p.add_argument("--type", "-t", default="note", help="memory type, e.g. note, command_output, user_preference")
    p.add_argument("--agent", help="agent identifier")
    p.add_argument("--thread", help="thread identifier")
    p.add_argument("--metadata", help="extra metadata as a JSON object")
    _common(p)
    p.set_defaults(handler=cmd_store)

    p = sub.add_parser("retrieve", help="write a memory's exact content to stdout")
    p.add_argument("key")
    p.add_argument("--head", type=int, help="only the first N lines")
    p.add_argument("--tail", type=int, help="only the last N lines")
    p.add_argument("--lines", help="line range START-END (1-based, inclusive)")
    p.add_argument("--grep", help="regular expression; prints matching lines as N:line")
    p.add_argument("--context", "-C", type=int, default=0, help="lines of context around grep matches")
    p.add_argument("--ignore-case", "-i", action="store_true", help="case-insensitive grep")
    p.add_argument("--max-matches", type=int, help="stop after N grep matches")
    p.add_argument("--version", type=int, help="an earlier version (see `history`); default: the current one")
    _common(p)
    p.set_defaults(handler=cmd_retrieve)

    _plain_command(sub, "show", cmd_show, "a memory's description, type, size and metadata (no content)", "key")

    p = sub.add_parser("search", help="search the user's memories, best first")
    p.add_argument("query")
    p.add_argument("--limit", "-n", type=int, default=5)
    p.add_argument("--type", "-t", help="only this memory type")
    _common(p)
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("list", help="list the user's memories, newest first")
    p.add_argument("--type", "-t", help="only this memory type")
    p.add_argument("--thread", help="only this thread")
    p.add_argument("--agent", help="only this agent")
    p.add_argument("--since", help="only memories created at or after this local ISO date/time, or an age: 24h, 7d")
    p.add_argument("--limit", "-n", type=int, default=50)
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--as-of", help="what held at this ISO date/time (replaced facts included, later ones not)")
    _common(p)
    p.set_defaults(handler=cmd_list)

    _plain_command(sub, "delete", cmd_delete, "delete one memory", "key")
    _plain_command(sub, "stats", cmd_stats, "memory counts and tokens by type")

    p = sub.add_parser("forget-user", help="delete a user and everything they own")
    p.add_argument("--yes", action="store_true", help="confirm the deletion")
    _common(p)
    p.set_defaults(handler=cmd_forget_user)

    db = sub.add_parser("db", help="database commands")
    db_sub = db.add_subparsers(dest="db_command", metavar="DB_COMMAND")
    db_sub.required = True
    p = db_sub.add_parser("status", help="server, schema version, extensions, counts")
    _common(p, user=False)
    p.set_defaults(handler=cmd_db_status)

    if command in sub.choices:  # a core command: no provider needed
        providers: list[str] = []
    else:  # a provider's command; or none / an unknown one: all, so help and errors list every command
        providers = [p for p, names in COMMAND_PROVIDERS.items() if command in names] or list(COMMAND_PROVIDERS)
    for provider in providers:
        module_name, _, func_name = provider.partition(":")
        getattr(importlib.import_module(module_name), func_name)(sub)
    return parser


async def _run(args: argparse.Namespace) -> int:
    cli = Cli(args)
    handler: Handler = args.handler
    try:
        return await handler(args, cli)
    except UsageError as exc:
        cli.error(str(exc))
        return EXIT_USAGE
    except MemoryNotFound as exc:
        cli.error(f"{exc} (for user {getattr(args, 'user', None) or os.environ.get('AGENT_MEMORY_USER')!r})")
        return EXIT_NOT_FOUND
    except ValueError as exc:
        cli.error(str(exc))
        return EXIT_USAGE
    except DatabaseUnavailable as exc:
        cli.error(str(exc))
        return EXIT_DB
    finally:
        await cli.close()


def _exit_now() -> None:
    from ..store import release_embedded_servers

    with contextlib.suppress(Exception):
        release_embedded_servers()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_TERMINATED)


async def _run_until_terminated(args: argparse.Namespace) -> int:
    """Run the command; SIGTERM cancels it like Ctrl-C does, so ``finally`` blocks and exit hooks run (the
    default SIGTERM kills Python before them, and one of those hooks stops the embedded server when its last
    user exits)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        if terminated:
            return
        terminated = True
        if task is not None:
            task.cancel()
        # A thread blocked on a read (the MCP stdio server waits on stdin) can hold the cancellation, or the
        # interpreter's exit, up forever: a daemon timer ends the process then, whatever the loop is doing.
        timer = threading.Timer(TERMINATE_GRACE_S, _exit_now)
        timer.daemon = True
        timer.start()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows, not the main thread)
        return await _run(args)
    try:
        return await _run(args)
    except asyncio.CancelledError:
        if terminated:
            return EXIT_TERMINATED
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    command = words[0] if words and not words[0].startswith("-") else None
    parser = build_parser(command)
    args = parser.parse_args(words)  # exits with code 2 on usage errors
    try:
        return asyncio.run(_run_until_terminated(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`agent-memory retrieve KEY | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
