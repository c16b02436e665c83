"""``agent-memory user ...`` (UI logins) and ``agent-memory ui`` (the Chainlit chat app).

Examples::

    agent-memory user add alice                 # prompts twice for a password
    printf 'a long password\\n' | agent-memory user add bob --password-stdin
    agent-memory user list
    agent-memory user delete bob                # removes the login; memories stay
    agent-memory ui --port 8000                 # http://localhost:8000

``ui`` applies the schema on the configured database (embedded PostgreSQL by default), makes sure the
session-signing secret exists, then runs Chainlit on ``chainlit_app/app.py`` in a child process that uses
the same database. Ctrl+C (or SIGTERM) stops both.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib.util
import json
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..auth import MIN_PASSWORD_CHARS, AccountExists, UserAccounts, auth_secret, check_password
from ..config import get_settings, header_auth_enabled
from ._main import EXIT_OK, EXIT_USAGE, Cli
from ._runtime import add_runtime_arguments

EXIT_NOT_FOUND = 1
PASSWORD_ATTEMPTS = 3  # interactive prompts before giving up


class UsageError(ValueError):
    """Bad input (exit code 2). A ValueError so that ``python -m agent_memory.cli`` maps it too: there
    ``agent_memory.cli.UsageError`` is not the class ``__main__`` catches."""


def app_dir() -> Path:
    """The ``chainlit_app`` package directory (repository checkout or installed package)."""
    import chainlit_app

    return Path(next(iter(chainlit_app.__path__))).resolve()


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    if not sys.stdin.isatty():
        raise UsageError("no terminal to prompt for a password: pipe it in with --password-stdin")
    for _ in range(PASSWORD_ATTEMPTS):
        first = getpass.getpass(f"Password for {args.name} (at least {MIN_PASSWORD_CHARS} characters): ")
        try:
            check_password(first)
        except ValueError as exc:
            print(f"{exc}; try again", file=sys.stderr)
            continue
        if getpass.getpass("Repeat password: ") == first:
            return first
        print("the passwords differ; try again", file=sys.stderr)
    raise UsageError(f"no password set after {PASSWORD_ATTEMPTS} attempts")


async def cmd_user_add(args: argparse.Namespace, cli: Cli) -> int:
    password = check_password(_read_password(args))
    store = await cli.store()
    try:
        await UserAccounts(store.db).add(args.name, password, replace=args.replace)
    except AccountExists as exc:
        raise UsageError(f"{exc}; use `agent-memory user add {args.name} --replace` to set a new password") from exc
    cli.emit({"user": args.name, "login": True}, f"user {args.name} can now log in to the UI (agent-memory ui)")
    return EXIT_OK


async def cmd_user_list(args: argparse.Namespace, cli: Cli) -> int:
    accounts = await UserAccounts((await cli.store()).db).list()
    lines = [
        f"{a.identifier:<24} {'login' if a.has_login else 'no login':<9} "
        f"{a.memories:>7} memories {a.threads:>5} threads"
        for a in accounts
    ]
    cli.emit([a.model_dump(mode="json") for a in accounts], "\n".join(lines) or "no users")
    return EXIT_OK


async def cmd_user_delete(args: argparse.Namespace, cli: Cli) -> int:
    removed = await UserAccounts((await cli.store()).db).remove_login(args.name)
    if not removed:
        cli.error(f"user {args.name!r} has no login")
        return EXIT_NOT_FOUND
    cli.emit(
        {"user": args.name, "login": False},
        f"removed the login of {args.name}; their memories and threads stay "
        f"(delete them with: agent-memory forget-user --user {args.name} --yes)",
    )
    return EXIT_OK


# `chainlit run` reads these as its own flags. CI=true (set by most CI systems) turns on Chainlit's CI mode,
# which sets OPENAI_API_KEY to a fake key: the agents would then call api.openai.com with it instead of
# saying that no model is configured.
CHAINLIT_FLAG_VARIABLES = ("CI",)


def chainlit_env(parent: Mapping[str, str], **settings: str) -> dict[str, str]:
    """The Chainlit child's environment: ``parent`` plus ``settings``, without the variables that would switch
    on Chainlit CLI modes the user did not ask for (:data:`CHAINLIT_FLAG_VARIABLES`).

    Example:
        >>> chainlit_env({"CI": "true", "PATH": "/usr/bin"}, CHAINLIT_APP_ROOT="/srv/ui")
        {'PATH': '/usr/bin', 'CHAINLIT_APP_ROOT': '/srv/ui'}
    """
    env = {name: value for name, value in parent.items() if name not in CHAINLIT_FLAG_VARIABLES}
    env.update(settings)
    return env


def prepare_app_root(home: Path) -> Path:
    """A writable Chainlit project directory under the home: config, public assets, uploads.

    Chainlit reads ``.chainlit/config.toml`` and ``public/`` from its app root and writes uploads into
    ``.files`` there, so the root must not be the (possibly read-only) package directory.
    """
    root = home / "ui"
    (root / ".chainlit").mkdir(parents=True, exist_ok=True)
    source = app_dir()
    shutil.copyfile(source / "config.toml", root / ".chainlit" / "config.toml")
    shutil.copyfile(source / "chainlit.md", root / "chainlit.md")
    if (root / "public").exists():
        shutil.rmtree(root / "public")
    shutil.copytree(source / "public", root / "public")
    _write_translations(root / ".chainlit" / "translations")
    return root


# Chainlit's login form asks for an "Email address"; our logins are user names (``agent-memory user add NAME``).
# Its step titles read "Using <name>" / "Used <name>"; ours say what happened ("ran python · exit 0 in 2.1s").
_WORDING = {
    ("auth", "login", "form", "email", "label"): "User name",
    ("auth", "login", "form", "email", "required"): "user name is a required field",
    ("auth", "login", "errors", "credentialsSignin"): "Wrong user name or password.",
    ("chat", "messages", "status", "using"): "",
    ("chat", "messages", "status", "used"): "",
}


def _write_translations(directory: Path) -> None:
    """Chainlit's English texts with the wording above (Chainlit keeps files that exist)."""
    spec = importlib.util.find_spec("chainlit")
    if spec is None or spec.origin is None:
        return
    source = Path(spec.origin).parent / "translations" / "en-US.json"
    texts = json.loads(source.read_text(encoding="utf-8"))
    for path, text in _WORDING.items():
        node = texts
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = text
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "en-US.json").write_text(json.dumps(texts, indent=2, ensure_ascii=False), encoding="utf-8")


async def cmd_ui(args: argparse.Namespace, cli: Cli) -> int:
    settings = get_settings()
    store = await cli.store()  # starts the embedded server when no URL is configured, applies the schema
    db = store.db
    accounts = UserAccounts(db)
    if await accounts.count_logins() == 0 and not header_auth_enabled():
        if not sys.stdin.isatty():
            cli.error(
                "no user can log in yet. Create one first:\n\n    agent-memory user add YOUR_NAME\n\n"
                "then run `agent-memory ui` again."
            )
            return EXIT_USAGE
        await _create_first_login(accounts)
    env = chainlit_env(
        os.environ,
        AGENT_MEMORY_DATABASE_URL=db.url,
        CHAINLIT_AUTH_SECRET=auth_secret(settings),
        CHAINLIT_APP_ROOT=str(prepare_app_root(settings.resolved_home())),
        AGENT_MEMORY_HOME=str(settings.resolved_home()),
        **({"AGENT_MEMORY_RUNTIME": args.runtime} if args.runtime else {}),
        **({"AGENT_MEMORY_RUNTIME_TLS": args.runtime_tls} if args.runtime_tls else {}),
        AGENT_MEMORY_EXECUTOR_SHARDS=str(args.shards),
        # Uvicorn would take the client address from X-Forwarded-For of any request from 127.0.0.1 (any local
        # process): the app needs the TCP peer, and believes proxies in AGENT_MEMORY_UI_TRUSTED_PROXIES itself.
        FORWARDED_ALLOW_IPS="",
    )
    if not _model_configured():
        print(
            "note: no model configured (OPENAI_API_KEY / OPENAI_BASE_URL / AGENT_MEMORY_MODEL_CONFIG); "
            "the UI starts and explains what to set.",
            file=sys.stderr,
        )
    host_shown = "localhost" if args.host in ("0.0.0.0", "127.0.0.1") else args.host
    print(f"agent-memory UI on http://{host_shown}:{args.port}  (database: {db.display_url})", flush=True)
    command = [sys.executable, "-m", "chainlit", "run", str(app_dir() / "app.py"), "--headless"]
    command += ["--host", args.host, "--port", str(args.port)]
    # The embedded server stays up while this process lives; the child only connects to it.
    await db.close()
    return await _run_child(command, env)


def _model_configured() -> bool:
    """The agents' model check of the app itself (a wrong value counts as configured: the chat says what)."""
    from ..agents import ModelConfigError, ModelSettings

    try:
        return ModelSettings.from_env(role="main").is_configured()
    except ModelConfigError:
        return True


async def _create_first_login(accounts: UserAccounts) -> None:
    """Interactive first run: nobody can log in yet, so ask for a name and a password (there is no default)."""
    default = os.environ.get("AGENT_MEMORY_USER") or getpass.getuser() or "me"
    print("No user can log in to the UI yet; let's create the first login.")
    name = (await asyncio.to_thread(input, f"User name [{default}]: ")).strip() or default
    args = argparse.Namespace(name=name, password_stdin=False)
    password = await asyncio.to_thread(_read_password, args)
    await accounts.add(name, password)
    print(f"user {name} created (more: agent-memory user add NAME)")


async def _run_child(command: list[str], env: dict[str, str]) -> int:
    # Its own process group: a terminal's Ctrl-C reaches only this launcher, which asks the server to stop once.
    # Chainlit's server re-raises SIGINT after its graceful shutdown (a KeyboardInterrupt traceback per task),
    # and a second one from the terminal cut that shutdown short; SIGTERM ends it the same way, silently.
    proc = await asyncio.create_subprocess_exec(*command, env=env, cwd=env["CHAINLIT_APP_ROOT"], process_group=0)
    loop = asyncio.get_running_loop()

    def forward(sig: int) -> None:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)

    handled: list[int] = []
    for sig in (int(signal.SIGINT), int(signal.SIGTERM)):
        try:
            loop.add_signal_handler(sig, forward, sig)
            handled.append(sig)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    try:
        code = await proc.wait()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM) else code


def register(subparsers: Any) -> None:
    """Add ``user`` and ``ui`` to the ``agent-memory`` parser."""
    user = subparsers.add_parser("user", help="UI logins: add, list, delete")
    user_sub = user.add_subparsers(dest="user_command", metavar="USER_COMMAND")
    user_sub.required = True

    p = user_sub.add_parser("add", help="create a UI login (prompts for a password)")
    p.add_argument("name", help="user identifier (the same as --user elsewhere)")
    p.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    p.add_argument("--replace", action="store_true", help="set a new password for an existing login")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_user_add)

    p = user_sub.add_parser("list", help="users, whether they can log in, memory and thread counts")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_user_list)

    p = user_sub.add_parser("delete", help="remove a user's login (memories and threads stay)")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(handler=cmd_user_delete)

    p = subparsers.add_parser("ui", help="start the chat UI (Chainlit) on the configured database")
    p.add_argument("--port", type=int, default=int(os.environ.get("AGENT_MEMORY_UI_PORT", "8000")))
    p.add_argument("--host", default=os.environ.get("AGENT_MEMORY_UI_HOST", "127.0.0.1"))
    add_runtime_arguments(p, who="users'")
    p.set_defaults(handler=cmd_ui)
