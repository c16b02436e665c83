"""``agent-memory runtime host|worker``: AutoGen's gRPC runtime, with executor workers that run users' code.

    agent-memory runtime host --listen 0.0.0.0:50051          # routes messages between all processes
    agent-memory runtime worker --connect HOST:50051 --role executor --shard 0 --shards 2
    agent-memory chat --user alice --runtime HOST:50051 --shards 2   # code runs on the workers

A worker runs each user's code in its own sandbox, in ``$AGENT_MEMORY_HOME/work/<user>/`` of the worker's
machine; a user always lands on shard ``sha256(user) % shards``, so their files stay on one worker.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
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


async def cmd_host(args: argparse.Namespace, cli: Cli) -> int:
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntimeHost

    host_part, _, port = args.listen.rpartition(":")
    with socket.socket() as probe:  # a clear error instead of gRPC's own when the port is taken
        try:
            probe.bind((host_part, int(port)))
        except OSError as exc:
            raise UsageError(f"cannot listen on {args.listen}: {exc.strerror}") from exc
    host = GrpcWorkerAgentRuntimeHost(address=args.listen)
    host.start()
    cli.emit({"listening": args.listen}, f"runtime host listening on {args.listen} (Ctrl-C stops it)")
    try:
        await _until_stopped()
    finally:
        await host.stop()
    return EXIT_OK


async def cmd_worker(args: argparse.Namespace, cli: Cli) -> int:
    from ..agents import (
        DEFAULT_TEAM_SPEC,
        AgentBuilder,
        ExecutorActor,
        RemoteExecutorUnavailable,
        connect_executor_runtime,
        executor_type,
        isolation_report,
    )

    if not 0 <= args.shard < args.shards:
        raise UsageError(f"--shard must be between 0 and {args.shards - 1}")
    spec = await AgentBuilder.load_spec(await cli.store(), args.spec) if args.spec else DEFAULT_TEAM_SPEC
    report = isolation_report()
    if spec.executor.sandbox_policy().isolation != "none" and not report.available:  # fail closed: no sandbox
        cli.error(f"this machine cannot run code in the sandbox: {report.detail}")
        return EXIT_USAGE
    home = get_settings().resolved_home()
    try:
        runtime = await connect_executor_runtime(args.connect)
    except RemoteExecutorUnavailable as exc:
        cli.error(str(exc))
        return EXIT_USAGE
    name = f"{socket.gethostname()}:{args.shard}"
    await ExecutorActor.register(
        runtime, executor_type(args.shard), lambda: ExecutorActor(home=home, spec=spec.executor, worker_name=name)
    )
    cli.emit({"connected": args.connect, "shard": args.shard, "shards": args.shards, "home": str(home)},
             f"executor worker {name} (shard {args.shard} of {args.shards}) connected to {args.connect}; "
             f"work directories under {home / 'work'}")  # fmt: skip
    try:
        await _until_stopped()
    finally:
        await runtime.stop()
    return EXIT_OK


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("runtime", help="AutoGen's gRPC runtime: a host and executor workers")
    sub = p.add_subparsers(dest="runtime_command", required=True)
    h = sub.add_parser("host", help="route messages between the chat processes and the executor workers")
    h.add_argument("--listen", type=_address, required=True, help="HOST:PORT to listen on")
    h.add_argument("--json", action="store_true")
    h.set_defaults(handler=cmd_host)
    w = sub.add_parser("worker", help="run users' code (sandboxed) for the runtime at --connect")
    w.add_argument("--connect", type=_address, required=True, help="HOST:PORT of the runtime host")
    w.add_argument("--role", choices=["executor"], default="executor")
    w.add_argument("--shard", type=int, default=0, help="which shard of the users this worker serves (0-based)")
    w.add_argument("--shards", type=int, default=1, help="how many executor workers share the users")
    w.add_argument("--spec", help="team spec whose executor settings (limits, sandbox) apply")
    w.add_argument("--json", action="store_true")
    w.set_defaults(handler=cmd_worker)
