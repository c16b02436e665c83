"""``agent-memory mcp`` (the MCP server) and ``agent-memory token`` (its HTTP bearer tokens).

Examples::

    agent-memory mcp --user alice                    # stdio: serves alice only (for Claude Desktop & co.)
    agent-memory token create --user alice --name laptop --expires 90d   # prints the token once
    agent-memory mcp --http 127.0.0.1:8765           # streamable HTTP at /mcp, bearer token required
    agent-memory token list
    agent-memory token revoke tok_1a2b3c4d5e6f       # or the token's first characters: amt_Xy12ab...
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta
from typing import Any

from ..auth import TokenInfo, TokenManager, TokenNotFound
from ._main import EXIT_NOT_FOUND, EXIT_OK, Cli


class UsageError(ValueError):
    """Bad command-line input: exit code 2 (``cli._run`` maps ValueError to 2). Not ``cli.UsageError``, which is
    a different class when the CLI runs as ``python -m agent_memory.cli`` (the module is then ``__main__``)."""


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT``, or ``:PORT`` / ``PORT`` (127.0.0.1)."""
    match = re.fullmatch(r"(?:\[?([^\]]*?)\]?:)?(\d{1,5})", value.strip())
    if not match or not 0 < int(match[2]) < 65536:
        raise UsageError(f"--http expects [HOST:]PORT such as 127.0.0.1:8765 or 8765, got {value!r}")
    return match[1] or "127.0.0.1", int(match[2])


def parse_duration(value: str) -> timedelta:
    match = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", value)
    if not match or int(match[1]) == 0:
        raise UsageError(f"--expires expects a positive duration such as 30m, 12h, 90d or 52w, got {value!r}")
    unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[match[2]]
    return timedelta(**{unit: int(match[1])})


def _user(args: argparse.Namespace, cli: Cli) -> str:
    try:
        return cli.user()
    except Exception as exc:  # cli.UsageError, seen as a foreign class under `python -m agent_memory.cli`
        raise UsageError(str(exc)) from None


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "-"


def token_line(info: TokenInfo) -> str:
    return (
        f"{info.id}  {info.token_prefix}...  user={info.user_id}  {info.status:<7}  created {_when(info.created_at)}"
        f"  last used {_when(info.last_used_at)}  expires {_when(info.expires_at)}  {info.name}"
    ).rstrip()


def _token_json(info: TokenInfo) -> dict[str, Any]:
    return {**info.model_dump(mode="json"), "status": info.status}


async def cmd_mcp(args: argparse.Namespace, cli: Cli) -> int:
    from ..mcp import create_server, serve_http

    if args.http:
        if getattr(args, "user", None):
            raise UsageError(
                "--http serves the users of bearer tokens (agent-memory token create --user U); "
                "--user is for the stdio transport"
            )
        host, port = parse_host_port(args.http)
        store = await cli.store()
        shown = f"[{host}]" if ":" in host else host
        print(
            f"agent-memory MCP server on http://{shown}:{port}/mcp (clients need a bearer token: "
            "agent-memory token create --user NAME)",
            file=sys.stderr,
            flush=True,
        )
        await serve_http(store, host, port, log_level=args.log_level.lower())
        return EXIT_OK
    user = _user(args, cli)
    server = create_server(await cli.store(), user_id=user, log_level=args.log_level)
    await server.run_stdio_async()
    return EXIT_OK


async def cmd_token_create(args: argparse.Namespace, cli: Cli) -> int:
    expires = parse_duration(args.expires) if args.expires else None
    tokens = TokenManager((await cli.store()).db)
    created = await tokens.create(_user(args, cli), name=args.name or "", expires_in=expires)
    cli.emit(
        {"token": created.token, **_token_json(created.info)},
        f"{created.token}\n\n"
        f"Token {created.info.id} for user {created.info.user_id!r}. It is shown only this once; only its hash is "
        "stored.\nUse it as 'Authorization: Bearer <token>' against `agent-memory mcp --http HOST:PORT`.",
    )
    return EXIT_OK


async def cmd_token_list(args: argparse.Namespace, cli: Cli) -> int:
    tokens = TokenManager((await cli.store()).db)
    user = getattr(args, "user", None)
    found = await tokens.list(user, include_revoked=args.all)
    cli.emit([_token_json(t) for t in found], "\n".join(token_line(t) for t in found) or "no tokens")
    return EXIT_OK


async def cmd_token_revoke(args: argparse.Namespace, cli: Cli) -> int:
    tokens = TokenManager((await cli.store()).db)
    try:
        info = await tokens.revoke(args.token, user_id=getattr(args, "user", None))
    except TokenNotFound as exc:
        cli.error(str(exc))
        return EXIT_NOT_FOUND
    cli.emit(_token_json(info), f"revoked {info.id} ({info.token_prefix}..., user {info.user_id!r})")
    return EXIT_OK


def register(subparsers: Any) -> None:
    """Add ``mcp`` and ``token`` to the ``agent-memory`` command."""
    p = subparsers.add_parser(
        "mcp",
        help="run the MCP server (stdio for one --user, or streamable HTTP with bearer tokens)",
        description="MCP server over the memory store. stdio (default) serves exactly the --user given; "
        "--http HOST:PORT serves streamable HTTP at /mcp to clients holding a token from `agent-memory token create`.",
    )
    p.add_argument("--user", "-u", help="user to serve over stdio (default: $AGENT_MEMORY_USER)")
    p.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve streamable HTTP (endpoint /mcp) instead of stdio; host 127.0.0.1 unless given",
    )
    p.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="server log level (stderr)",
    )
    p.set_defaults(handler=cmd_mcp)

    token = subparsers.add_parser("token", help="bearer tokens for the MCP server's HTTP transport")
    token_sub = token.add_subparsers(dest="token_command", metavar="TOKEN_COMMAND")
    token_sub.required = True

    p = token_sub.add_parser("create", help="create a token for --user; prints it once")
    p.add_argument("--user", "-u", help="user the token acts for (default: $AGENT_MEMORY_USER)")
    p.add_argument("--name", help="label shown in `token list`, e.g. the client or machine")
    p.add_argument("--expires", metavar="DURATION", help="lifetime such as 12h, 90d, 52w (default: no expiry)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_token_create)

    p = token_sub.add_parser("list", help="list tokens (never the tokens themselves)")
    p.add_argument("--user", "-u", help="only this user's tokens")
    p.add_argument("--all", action="store_true", help="include revoked tokens")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_token_list)

    p = token_sub.add_parser("revoke", help="revoke a token by id (tok_...) or by its first characters (amt_...)")
    p.add_argument("token", metavar="TOKEN_ID_OR_PREFIX")
    p.add_argument("--user", "-u", help="only match this user's tokens")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_token_revoke)
