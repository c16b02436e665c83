"""`agent-memory update | history | retract | export | import | audit | purge`: a memory's life after it is stored.

agent-memory update KEY [FILE|-] --user U [-d DESC]      a new version (content from FILE or stdin)
agent-memory history KEY --user U [--json]              every version: who, when, through what
agent-memory retract KEY --user U --reason R            hidden from search, still retrievable by key
agent-memory export --user U [--out FILE]               JSON Lines (stdout without --out)
agent-memory import FILE --user U                       all memories of an export, or none
agent-memory audit --user U [--key KEY] [--json]        who changed what
agent-memory purge [--user U]                           delete memories past their expiry
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ._main import EXIT_OK, Cli, UsageError, _common, _read_input


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source} is not valid UTF-8 (byte {exc.start}); agent-memory stores text exactly") from exc


async def cmd_update(args: argparse.Namespace, cli: Cli) -> int:
    content = None
    if args.file is not None or args.description is None:  # no description: the new content is the update
        raw, source = await asyncio.to_thread(_read_input, args.file)
        content = _decode(raw, source)
    store = await cli.store()
    item = await store.update(
        args.key, user_id=cli.user(), content=content, description=args.description, actor=cli.user(), surface="cli"
    )
    cli.emit(item.model_dump(mode="json"), f"{item.memory_key} is now version {item.version}")
    return EXIT_OK


async def cmd_history(args: argparse.Namespace, cli: Cli) -> int:
    store = await cli.store()
    item = await store.get(args.key, user_id=cli.user())
    versions = await store.history(args.key, user_id=cli.user())
    status = item.status + (f" ({item.status_reason})" if item.status_reason else "")
    if item.valid_until is not None:
        status += f", replaced on {item.valid_until:%Y-%m-%d %H:%M} by a newer fact on '{item.subject}'"
    lines = [f"{item.memory_key}: {status}"]
    for v in versions:
        who = f" by {v.actor}" if v.actor else ""
        mark = "*" if v.current else " "
        lines.append(
            f"{mark} v{v.version}  {v.written_at:%Y-%m-%d %H:%M:%S}  via {v.surface}{who}  "
            f"{v.token_count} tok  {v.description}"
        )
    data = {"item": item.model_dump(mode="json"), "versions": [v.model_dump(mode="json") for v in versions]}
    cli.emit(data, "\n".join(lines))
    return EXIT_OK


async def cmd_retract(args: argparse.Namespace, cli: Cli) -> int:
    store = await cli.store()
    item = await store.retract(args.key, user_id=cli.user(), reason=args.reason, actor=cli.user(), surface="cli")
    cli.emit(item.model_dump(mode="json"), f"retracted {item.memory_key} ({item.status_reason})")
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, cli: Cli) -> int:
    store = await cli.store()
    count = -1  # the header line is not a memory
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: ASYNC230
    try:
        async for line in store.export(user_id=cli.user()):
            out.write(line + "\n")
            count += 1
    finally:
        if args.out:
            out.close()
    if args.out:
        cli.emit(
            {"exported": count, "file": args.out}, f"exported {count} memor{'y' if count == 1 else 'ies'} to {args.out}"
        )
    return EXIT_OK


async def cmd_import(args: argparse.Namespace, cli: Cli) -> int:
    raw, source = await asyncio.to_thread(_read_input, args.file)
    lines = _decode(raw, source).splitlines()
    store = await cli.store()
    keys = await store.import_lines(lines, user_id=cli.user(), actor=cli.user(), surface="cli")
    cli.emit({"imported": len(keys), "keys": keys}, f"imported {len(keys)} memor{'y' if len(keys) == 1 else 'ies'}")
    return EXIT_OK


async def cmd_audit(args: argparse.Namespace, cli: Cli) -> int:
    store = await cli.store()
    entries = await store.audit_log(user_id=cli.user(), key=args.key, limit=args.limit)
    lines = []
    for e in entries:
        who = f" by {e.actor}" if e.actor else ""
        why = f"  ({e.reason})" if e.reason else ""
        lines.append(f"{e.at:%Y-%m-%d %H:%M:%S}  {e.action:<8} {e.memory_key or '-'}  via {e.surface}{who}{why}")
    cli.emit([e.model_dump(mode="json") for e in entries], "\n".join(lines) or "no changes recorded")
    return EXIT_OK


async def cmd_purge(args: argparse.Namespace, cli: Cli) -> int:
    user = getattr(args, "user", None)
    removed = await (await cli.store()).purge_expired(user_id=user, surface="cli")
    cli.emit({"purged": removed}, f"purged {removed} expired memor{'y' if removed == 1 else 'ies'}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("update", help="write a new version of a memory (the old one stays in its history)")
    p.add_argument("key")
    p.add_argument("file", nargs="?", help="new content from this file ('-': stdin); omit with -d to keep it")
    p.add_argument("--description", "-d", help="new description")
    _common(p)
    p.set_defaults(handler=cmd_update)

    p = sub.add_parser("history", help="every version of a memory: who, when, through what")
    p.add_argument("key")
    _common(p)
    p.set_defaults(handler=cmd_history)

    p = sub.add_parser("retract", help="hide a memory from search and the user layer (it stays retrievable)")
    p.add_argument("key")
    p.add_argument("--reason", "-r", required=True, help="why it is retracted")
    _common(p)
    p.set_defaults(handler=cmd_retract)

    p = sub.add_parser("export", help="the user's memories as JSON Lines, content byte for byte")
    p.add_argument("--out", "-o", type=Path, help="write to this file (default: stdout)")
    _common(p)
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("import", help="import an export into this user (all memories or none)")
    p.add_argument("file", help="the JSON Lines file ('-': stdin)")
    _common(p)
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("audit", help="who changed what in the user's memory, newest first")
    p.add_argument("--key", help="only this memory")
    p.add_argument("--limit", "-n", type=int, default=100)
    _common(p)
    p.set_defaults(handler=cmd_audit)

    p = sub.add_parser("purge", help="delete memories past their expiry (of --user, or everyone's)")
    _common(p)
    p.set_defaults(handler=cmd_purge)
