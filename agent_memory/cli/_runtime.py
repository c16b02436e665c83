"""``agent-memory runtime host|worker``: AutoGen's gRPC runtime, with executor workers that run users' code.

    agent-memory runtime certs --out tls/ --host HOST           # the deployment's certificates (once)
    agent-memory runtime host --listen 0.0.0.0:50051 --tls tls/   # routes messages between all processes
    agent-memory runtime worker --connect HOST:50051 --tls tls/ --role executor --shard 0 --shards 2
    AGENT_MEMORY_RUNTIME_TLS=tls/ agent-memory chat --user alice --runtime HOST:50051 --shards 2

Without TLS, any process that reaches the host's port could have a worker run code as any user: a host listening
beyond this machine (not on a loopback address) refuses to start without ``--tls`` unless ``--insecure`` says the
network is private.

A worker runs each user's code in its own sandbox, in ``$AGENT_MEMORY_HOME/work/<user>/`` of the worker's
machine; a user always lands on shard ``sha256(user) % shards``, so their files stay on one worker.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import signal
import socket
from pathlib import Path
from typing import Any

from ..config import get_settings
from ._main import EXIT_OK, EXIT_USAGE, Cli, UsageError

log = logging.getLogger(__name__)


def _address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r}: expected HOST:PORT, e.g. 127.0.0.1:50051")
    return value


async def _until_stopped() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _tls(args: argparse.Namespace) -> Any:
    from ..agents import RuntimeTLS

    directory = args.tls or os.environ.get("AGENT_MEMORY_RUNTIME_TLS")
    return RuntimeTLS.load(directory) if directory else None


async def cmd_certs(args: argparse.Namespace, cli: Cli) -> int:
    from ..agents import make_certificates

    hosts = list(dict.fromkeys([*args.host, "localhost", "127.0.0.1"]))
    written = make_certificates(Path(args.out), hosts, days=args.days)
    text = (
        f"certificates for {', '.join(hosts)} in {args.out}: copy ca.pem, node.pem and node-key.pem to every "
        "machine of the deployment and pass --tls DIR (or AGENT_MEMORY_RUNTIME_TLS); keep ca-key.pem here"
    )
    cli.emit({"directory": args.out, "hosts": hosts, "files": [str(p) for p in written]}, text)
    return EXIT_OK


async def cmd_host(args: argparse.Namespace, cli: Cli) -> int:
    from ..agents import RuntimeTLSError, runtime_host

    host_part, _, port = args.listen.rpartition(":")
    try:
        tls = _tls(args)
    except RuntimeTLSError as exc:
        raise UsageError(str(exc)) from exc
    if tls is None and not args.insecure and not _loopback(host_part):
        raise UsageError(
            f"--listen {args.listen} reaches beyond this machine: without TLS any process that reaches the port "
            "could have a worker run code as any user. Make certificates with `agent-memory runtime certs --out "
            "DIR --host <name>` and pass --tls DIR, or pass --insecure if the network is private"
        )
    with socket.socket() as probe:  # a clear error instead of gRPC's own when the port is taken
        try:
            probe.bind((host_part, int(port)))
        except OSError as exc:
            raise UsageError(f"cannot listen on {args.listen}: {exc.strerror}") from exc
    host = runtime_host(args.listen, tls)
    host.start()
    cli.emit({"listening": args.listen, "tls": tls is not None},
             f"runtime host listening on {args.listen}{' (TLS)' if tls else ''} (Ctrl-C stops it)")  # fmt: skip
    try:
        await _until_stopped()
    finally:
        await host.stop()
    return EXIT_OK


async def cmd_worker(args: argparse.Namespace, cli: Cli) -> int:
    from ..agents import (
        DEFAULT_TEAM_SPEC,
        SESSION_MESSAGE_TYPES,
        AgentBuilder,
        AgentSession,
        ExecutorActor,
        ModelConfigError,
        RemoteExecutorUnavailable,
        RuntimeTLSError,
        SessionActor,
        add_serializers,
        connect_executor_runtime,
        executor_type,
        isolation_report,
        session_type,
    )

    if not 0 <= args.shard < args.shards:
        raise UsageError(f"--shard must be between 0 and {args.shards - 1}")
    spec = await AgentBuilder.load_spec(await cli.store(), args.spec) if args.spec else DEFAULT_TEAM_SPEC
    report = isolation_report()
    if spec.executor.sandbox_policy().isolation != "none" and not report.available:  # fail closed: no sandbox
        cli.error(f"this machine cannot run code in the sandbox: {report.detail}")
        return EXIT_USAGE
    home = get_settings().resolved_home()
    name = f"{socket.gethostname()}:{args.shard}"
    try:
        runtime = await connect_executor_runtime(args.connect, tls=_tls(args))
    except (RemoteExecutorUnavailable, RuntimeTLSError) as exc:
        cli.error(str(exc))
        return EXIT_USAGE
    registration: Any
    if args.role == "session":  # the agents of users' threads run here; code here too, or on executor workers
        store = await cli.store()
        add_serializers(runtime, *SESSION_MESSAGE_TYPES)
        code_runtime = runtime if args.executor_shards else None
        try:
            AgentBuilder(store, "model-check", spec=spec).build_model_client()
        except ModelConfigError as exc:
            cli.error(str(exc))
            return EXIT_USAGE

        async def build(user_id: str, thread_id: str) -> AgentSession:
            builder = AgentBuilder(store, user_id, spec=spec, home=home, executor_runtime=code_runtime,
                                   executor_shards=max(args.executor_shards, 1))  # fmt: skip
            return await builder.build(thread_id=thread_id)

        registration = SessionActor.register(runtime, session_type(args.shard), lambda: SessionActor(build))
    else:
        registration = ExecutorActor.register(
            runtime, executor_type(args.shard), lambda: ExecutorActor(home=home, spec=spec.executor, worker_name=name)
        )
    try:  # the host answers a registration only over a working connection (TLS included)
        await asyncio.wait_for(registration, 30)
    except Exception as exc:
        cli.error(f"the runtime host at {args.connect} did not accept this worker ({type(exc).__name__}: {exc}). "
                  "If it uses TLS, pass the deployment's --tls DIR; if not, check the address")  # fmt: skip
        return EXIT_USAGE
    cli.emit({"connected": args.connect, "role": args.role, "shard": args.shard, "shards": args.shards,
              "home": str(home)},
             f"{args.role} worker {name} (shard {args.shard} of {args.shards}) connected to {args.connect}; "
             f"work directories under {home / 'work'}")  # fmt: skip
    try:
        await _until_stopped()
    finally:
        await runtime.stop()
    return EXIT_OK


def add_runtime_arguments(p: argparse.ArgumentParser, *, who: str) -> None:
    """``--runtime``, ``--shards`` and ``--runtime-tls`` (and their variables) for ``chat`` and ``ui``."""
    env = os.environ.get
    p.add_argument(
        "--runtime",
        metavar="HOST:PORT",
        default=env("AGENT_MEMORY_RUNTIME"),
        help=f"run {who} code on the executor workers of this runtime host ($AGENT_MEMORY_RUNTIME)",
    )
    p.add_argument(
        "--shards",
        type=int,
        default=int(env("AGENT_MEMORY_EXECUTOR_SHARDS", "1")),
        help="how many executor workers share the users ($AGENT_MEMORY_EXECUTOR_SHARDS, default 1)",
    )
    p.add_argument(
        "--runtime-tls",
        metavar="DIR",
        default=env("AGENT_MEMORY_RUNTIME_TLS"),
        help="the deployment's TLS certificates ($AGENT_MEMORY_RUNTIME_TLS; `agent-memory runtime certs`)",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("runtime", help="AutoGen's gRPC runtime: a host and executor workers")
    sub = p.add_subparsers(dest="runtime_command", required=True)
    h = sub.add_parser("host", help="route messages between the chat processes and the executor workers")
    h.add_argument("--listen", type=_address, required=True, help="HOST:PORT to listen on")
    h.add_argument("--tls", metavar="DIR", help="the deployment's certificates ($AGENT_MEMORY_RUNTIME_TLS)")
    h.add_argument("--insecure", action="store_true", help="listen beyond this machine without TLS (private network)")
    h.add_argument("--json", action="store_true")
    h.set_defaults(handler=cmd_host)
    w = sub.add_parser("worker", help="run users' code (sandboxed) for the runtime at --connect")
    w.add_argument("--connect", type=_address, required=True, help="HOST:PORT of the runtime host")
    w.add_argument("--tls", metavar="DIR", help="the deployment's certificates ($AGENT_MEMORY_RUNTIME_TLS)")
    w.add_argument("--role", choices=["executor", "session"], default="executor",
                   help="executor: runs users' code; session: runs the agents of users' threads (needs the database "
                   "and the model settings)")  # fmt: skip
    w.add_argument(
        "--executor-shards",
        type=int,
        default=0,
        help="session workers: send code to this many executor workers (0: run it here, sandboxed)",
    )
    w.add_argument("--shard", type=int, default=0, help="which shard of the users this worker serves (0-based)")
    w.add_argument("--shards", type=int, default=1, help="how many executor workers share the users")
    w.add_argument("--spec", help="team spec whose executor settings (limits, sandbox) apply")
    w.add_argument("--json", action="store_true")
    w.set_defaults(handler=cmd_worker)
    c = sub.add_parser("certs", help="make the deployment's TLS authority (once) and a certificate for its machines")
    c.add_argument("--out", required=True, help="directory for ca.pem, node.pem, node-key.pem (and ca-key.pem)")
    c.add_argument("--host", action="append", default=[], help="a name or IP the processes use for the host")
    c.add_argument("--days", type=int, default=825, help="validity in days")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=cmd_certs)
