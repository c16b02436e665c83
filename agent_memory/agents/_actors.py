"""Code execution as an actor on AutoGen's runtime, so executors can run on other machines.

An :class:`ExecutorActor` (an autogen-core ``RoutedAgent``) runs the code blocks of a :class:`RunCodeRequest` in
the same sandboxed :class:`LocalProcessGroupExecutor` a single-machine team uses, in the user's work directory
on the worker, and answers with a :class:`RunCodeResult`. A :class:`CancelRun` message stops a run (its whole
process namespace). A :class:`RemoteCodeExecutor` is the other side: an AutoGen ``CodeExecutor`` that sends the
blocks to the actor, so the team's :class:`ExecutorAgent` (placeholders, offloading, progress) works unchanged.

Messages are Pydantic models, serialised as JSON by AutoGen's gRPC runtime (``autogen-ext[grpc]``): a host
(``GrpcWorkerAgentRuntimeHost``) routes them, workers register the actor, and the UI or the chat process is a
client runtime. AutoGen's Python host accepts one worker per agent type, so executors are sharded: worker *i* of
*n* registers ``agent_memory_executor_i`` and a user's runs always go to shard ``sha256(user) % n``, where that
user's work directory lives (affinity, no shared storage needed). No worker reachable: the run fails with a
clear error; code never falls back to running in the client process.

Example:
    >>> shard_of("alice", 4) == shard_of("alice", 4)
    True
    >>> executor_type(2)
    'agent_memory_executor_2'
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import uuid
from collections.abc import Callable, Coroutine
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from autogen_core import (
    AgentId,
    AgentRuntime,
    CancellationToken,
    MessageContext,
    RoutedAgent,
    message_handler,
    try_get_known_serializers_for_type,
)
from autogen_core.code_executor import CodeBlock, CodeExecutor
from pydantic import BaseModel, Field

from ._executor import ExecutionResult, LocalProcessGroupExecutor
from ._progress import OutputTail, while_running
from ._runtime_tls import RuntimeTLS
from ._spec import ExecutorSpec
from ._workspace import safe_path_part, user_work_root

if TYPE_CHECKING:
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

EXECUTOR_TYPE_PREFIX = "agent_memory_executor"
PROGRESS_SINK_PREFIX = "agent_memory_progress"
PROGRESS_SINK_KEY = "runs"
log = logging.getLogger(__name__)


class Block(BaseModel):
    language: str
    code: str


class RunCodeRequest(BaseModel):
    """Run these blocks for this user and thread (the key of the actor that receives it is the user)."""

    run_id: str
    user_id: str
    thread_id: str
    blocks: list[Block]
    progress_to: str = Field(default="", description="agent type of the sender's progress sink ('' = none)")


class RunCodeResult(BaseModel):
    exit_code: int
    output: str
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0
    not_utf8: bool = False
    worker: str = Field(default="", description="which worker ran it")


class CancelRun(BaseModel):
    """Stop a run (Stop in the UI, Ctrl-C, a cancelled turn): its processes are killed on the worker."""

    run_id: str


class RunProgress(BaseModel):
    """A run on a worker is still going: what the UI's running step shows (sent twice a second)."""

    run_id: str
    elapsed_s: float
    output_bytes: int
    tail: str = ""


class Ping(BaseModel):
    """Is the worker there? (Sent before a run and every few seconds during it; the host drops messages for an
    agent type no worker serves, so silence is how a missing or dead worker shows.)"""


class Pong(BaseModel):
    worker: str = ""


MESSAGE_TYPES: tuple[type[BaseModel], ...] = (RunCodeRequest, RunCodeResult, RunProgress, CancelRun, Ping, Pong)
LIVENESS_SECONDS = 5.0


def add_serializers(runtime: Any, *extra: type[BaseModel]) -> None:
    """Teach a runtime (gRPC worker or client) the actors' message types (and ``extra`` ones)."""
    for message_type in (*MESSAGE_TYPES, *extra):
        runtime.add_message_serializer(try_get_known_serializers_for_type(message_type))


async def within(request: Coroutine[Any, Any, Any], seconds: float) -> Any:
    """The answer to a request, or TimeoutError after ``seconds``; the request itself is left to finish (AutoGen's
    gRPC runtime fails noisily when an answer arrives for a request that was cancelled)."""
    return await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(request)), seconds)


def shard_of(user_id: str, shards: int) -> int:
    """The executor shard of a user: stable across processes and restarts."""
    return int.from_bytes(sha256(user_id.encode()).digest()[:8], "big") % max(shards, 1)


def executor_type(shard: int) -> str:
    return f"{EXECUTOR_TYPE_PREFIX}_{shard}"


class ExecutorActor(RoutedAgent):
    """Runs code for any user routed to this worker, each in their own sandboxed work directory."""

    def __init__(self, *, home: Path, spec: ExecutorSpec, worker_name: str = "") -> None:
        super().__init__("runs code blocks in the sandbox for one user")
        self._home = home
        self._spec = spec
        self._worker_name = worker_name
        self._runs: dict[str, CancellationToken] = {}

    @message_handler
    async def run_code(self, message: RunCodeRequest, ctx: MessageContext) -> RunCodeResult:
        executor = LocalProcessGroupExecutor(
            timeout=self._spec.timeout_seconds,
            work_dir=user_work_root(self._home, message.user_id) / safe_path_part(message.thread_id),
            max_output_bytes=self._spec.max_output_bytes,
            sandbox=self._spec.sandbox_policy(),
            owner=message.user_id,
            home=self._home,
        )
        token = CancellationToken()
        self._runs[message.run_id] = token
        executor.output_tail = tail = OutputTail()
        blocks = [CodeBlock(code=b.code, language=b.language) for b in message.blocks]
        run = asyncio.ensure_future(executor.execute_code_blocks(blocks, cancellation_token=token))
        forward = asyncio.ensure_future(self._forward_progress(message, run, tail))
        try:
            result = await run
        finally:
            self._runs.pop(message.run_id, None)
            forward.cancel()
        return RunCodeResult(
            exit_code=result.exit_code, output=result.output, duration_s=getattr(result, "duration_s", 0.0),
            timed_out=getattr(result, "timed_out", False), truncated=getattr(result, "truncated", False),
            output_bytes=getattr(result, "output_bytes", 0), not_utf8=getattr(result, "not_utf8", False),
            worker=self._worker_name,
        )  # fmt: skip

    async def _forward_progress(self, message: RunCodeRequest, run: asyncio.Future[Any], tail: OutputTail) -> None:
        if not message.progress_to:
            return
        sink = AgentId(message.progress_to, PROGRESS_SINK_KEY)
        languages = [b.language for b in message.blocks]
        async for p in while_running(run, tail, source="executor", languages=languages):
            update = RunProgress(run_id=message.run_id, elapsed_s=p.elapsed_s, output_bytes=p.output_bytes,
                                 tail=p.tail)  # fmt: skip
            try:  # best effort: the result carries the whole output anyway
                await within(self.send_message(update, sink), LIVENESS_SECONDS)
            except Exception as exc:
                log.debug("progress of run %s not delivered: %s", message.run_id, exc)

    @message_handler
    async def ping(self, message: Ping, ctx: MessageContext) -> Pong:
        return Pong(worker=self._worker_name)

    @message_handler
    async def cancel_run(self, message: CancelRun, ctx: MessageContext) -> Pong:
        token = self._runs.get(message.run_id)
        if token is not None:
            token.cancel()
        return Pong(worker=self._worker_name)  # an answer, so the sender need not wait for a timeout


class ProgressSink(RoutedAgent):
    """The sending side's mailbox for :class:`RunProgress`: mirrors each update into the tail of its run."""

    def __init__(self, tails: dict[str, OutputTail]) -> None:
        super().__init__("shows the progress of runs on executor workers")
        self._tails = tails

    @message_handler
    async def progress(self, message: RunProgress, ctx: MessageContext) -> Pong:
        tail = self._tails.get(message.run_id)
        if tail is not None:
            tail.mirror(message.output_bytes, message.tail)
        return Pong()


# Mailboxes of this process on a runtime: per (runtime, prefix) an agent type unique to the process, the routes its
# agent delivers to (shared with the senders), and its registration (a task: concurrent first uses wait for one).
_mailboxes: WeakKeyDictionary[AgentRuntime, dict[str, tuple[str, Any, asyncio.Future[Any]]]] = WeakKeyDictionary()


async def mailbox(runtime: AgentRuntime, prefix: str, routes: Any, agent_class: Any) -> tuple[str, Any]:
    """Register once per runtime an agent type ``<prefix>_<unique>`` whose agent is ``agent_class(routes)``; returns
    the type (what workers address) and the routes in use (``routes`` the first time)."""
    boxes = _mailboxes.setdefault(runtime, {})
    entry = boxes.get(prefix)
    if entry is None:
        box_type = f"{prefix}_{uuid.uuid4().hex}"
        registration = agent_class.register(runtime, box_type, lambda: agent_class(routes))
        entry = (box_type, routes, asyncio.ensure_future(registration))
        boxes[prefix] = entry
    try:
        await asyncio.shield(entry[2])
    except Exception:
        boxes.pop(prefix, None)
        raise
    return entry[0], entry[1]


async def progress_sink(runtime: AgentRuntime) -> tuple[str, dict[str, OutputTail]]:
    """The agent type workers send :class:`RunProgress` to, and the tails of the runs in flight."""
    tails: dict[str, OutputTail] = {}
    return await mailbox(runtime, PROGRESS_SINK_PREFIX, tails, ProgressSink)


async def answers(runtime: AgentRuntime, recipient: AgentId, failure: Callable[[BaseException], Exception]) -> None:
    """Whether ``recipient``'s worker is there: a :class:`Ping` answered within the liveness time, else ``failure``."""
    try:
        await within(runtime.send_message(Ping(), recipient), LIVENESS_SECONDS)
    except Exception as exc:
        raise failure(exc) from exc


class RemoteExecutorUnavailable(RuntimeError):
    """No executor worker answered: the run is refused (code never runs in the client process instead)."""


def grpc_runtime(address: str, tls: RuntimeTLS | None = None) -> GrpcWorkerAgentRuntime:
    """AutoGen's gRPC worker runtime for the host at ``address``, with request ids unique across processes, and
    mutual TLS with the deployment's certificates when ``tls`` is given.

    AutoGen's host keys the answers it waits for by target process and request id, and every runtime numbers its
    requests from 1 (microsoft/autogen#7016): two chat processes sending to one worker at once could get each
    other's answers, another user's output among them. A per-process prefix makes the ids distinct.
    """
    grpc: Any = importlib.import_module("grpc")
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime  # grpc is imported only where it is used
    from autogen_ext.runtimes.grpc._worker_runtime import HostConnection
    from autogen_ext.runtimes.grpc.protos import agent_worker_pb2_grpc

    class UniqueRequestIdRuntime(GrpcWorkerAgentRuntime):
        _prefix = uuid.uuid4().hex

        async def _get_new_request_id(self) -> str:
            return f"{self._prefix}-{await super()._get_new_request_id()}"

        async def start(self) -> None:
            if tls is None:
                return await super().start()
            # AutoGen's connection opens a plaintext channel; the same connection over TLS:
            options = list({**dict(HostConnection.DEFAULT_GRPC_CONFIG), **dict(self._extra_grpc_config)}.items())
            channel = grpc.aio.secure_channel(address, tls.channel_credentials(), options=options)
            stub = agent_worker_pb2_grpc.AgentRpcStub(channel)
            connection = HostConnection(channel, stub)
            connection._connection_task = await connection._connect(
                stub, connection._send_queue, connection._recv_queue, connection._client_id
            )
            self._host_connection = connection
            if self._read_task is None:
                self._read_task = asyncio.create_task(self._run_read_loop())
            self._running = True

    return UniqueRequestIdRuntime(host_address=address)


async def connect_executor_runtime(
    address: str, *, tls: RuntimeTLS | None = None, timeout_s: float = 15.0
) -> GrpcWorkerAgentRuntime:
    """A client runtime on the gRPC host at ``address`` ("HOST:PORT"), ready to send code to executor workers
    (over mutual TLS with ``tls``)."""
    runtime = grpc_runtime(address, tls)
    add_serializers(runtime)
    try:
        await asyncio.wait_for(runtime.start(), timeout_s)
    except Exception as exc:
        raise RemoteExecutorUnavailable(
            f"cannot reach the runtime host at {address} ({type(exc).__name__}: {str(exc)[:300]}). Start it with "
            "`agent-memory runtime host --listen HOST:PORT`; if it uses TLS, give this process the deployment's "
            "certificates (--tls DIR or AGENT_MEMORY_RUNTIME_TLS)"
        ) from exc
    return runtime


class RemoteCodeExecutor(CodeExecutor):
    """An AutoGen ``CodeExecutor`` whose blocks run on an :class:`ExecutorActor` of the runtime."""

    def __init__(self, runtime: AgentRuntime, *, user_id: str, thread_id: str, shards: int = 1,
                 timeout_seconds: float = 60.0, address: str = "") -> None:  # fmt: skip
        self._runtime = runtime
        self._user_id = user_id
        self._thread_id = thread_id
        self._recipient = AgentId(executor_type(shard_of(user_id, shards)), safe_path_part(user_id))
        self._reply_timeout = timeout_seconds + 30  # the worker's own timeout ends the run first
        self._address = address
        self.output_tail: OutputTail | None = None  # mirrors the worker's progress updates while a run is on

    async def execute_code_blocks(
        self, code_blocks: list[CodeBlock], cancellation_token: CancellationToken
    ) -> ExecutionResult:
        run_id = uuid.uuid4().hex
        sink_type, tails = await progress_sink(self._runtime)
        request = RunCodeRequest(
            run_id=run_id, user_id=self._user_id, thread_id=self._thread_id,
            blocks=[Block(language=b.language, code=b.code) for b in code_blocks], progress_to=sink_type,
        )  # fmt: skip
        await self._alive("the code was not run")
        if self.output_tail is not None:
            tails[run_id] = self.output_tail
        try:
            return await self._run(request, cancellation_token)
        finally:
            tails.pop(run_id, None)

    async def _run(self, request: RunCodeRequest, cancellation_token: CancellationToken) -> ExecutionResult:
        run_id = request.run_id
        sent = asyncio.ensure_future(self._runtime.send_message(request, self._recipient))
        cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_cancel() -> None:
            if not cancelled.done():
                cancelled.set_result(None)

        cancellation_token.add_callback(on_cancel)
        deadline = asyncio.get_running_loop().time() + self._reply_timeout
        try:
            while True:
                done, _ = await asyncio.wait({sent, cancelled}, timeout=LIVENESS_SECONDS,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                if sent in done:
                    break
                if cancelled in done:
                    raise asyncio.CancelledError
                if asyncio.get_running_loop().time() > deadline:
                    raise RemoteExecutorUnavailable(
                        f"no answer from the executor worker in {self._reply_timeout:.0f} s"
                    )
                await self._alive("the run was lost")  # a worker that died mid-run fails it within seconds
            try:
                result = sent.result()
            except Exception as exc:
                raise RemoteExecutorUnavailable(
                    f"the executor worker failed the run: {type(exc).__name__}: {exc}"
                ) from exc
        except BaseException:
            if not sent.done():
                sent.cancel()
                await self._cancel_remote(run_id)
            raise
        if not isinstance(result, RunCodeResult):
            raise RemoteExecutorUnavailable(f"the executor worker answered {type(result).__name__}, not a result")
        return ExecutionResult(
            exit_code=result.exit_code, output=result.output, code_file=None, duration_s=result.duration_s,
            timed_out=result.timed_out, truncated=result.truncated, output_bytes=result.output_bytes,
            languages=tuple(b.language for b in request.blocks), not_utf8=result.not_utf8,
        )  # fmt: skip

    async def _alive(self, consequence: str) -> None:
        await answers(self._runtime, self._recipient, lambda exc: RemoteExecutorUnavailable(
            f"{consequence}: no executor worker answers for {self._recipient.type} ({type(exc).__name__}). Start "
            f"one with `agent-memory runtime worker --connect {self._address or 'HOST:PORT'}`; code never runs in "
            "this process instead"))  # fmt: skip

    async def _cancel_remote(self, run_id: str) -> None:
        try:
            await within(self._runtime.send_message(CancelRun(run_id=run_id), self._recipient), 10)
        except Exception:  # the worker is gone: its runs died with it (--die-with-parent)
            pass

    async def restart(self) -> None:
        pass

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass
