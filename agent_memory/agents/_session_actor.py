"""The agents themselves as actors: a session actor per (user, thread) runs the team on a worker of the runtime.

AgentChat teams do not run on AutoGen's gRPC runtime (their group-chat messages do not deserialize across it,
microsoft/autogen#4766), so the team runs *inside* an actor: a :class:`SessionActor` (an autogen-core
``RoutedAgent``) keyed by the user and thread builds the team with :class:`~agent_memory.agents.AgentBuilder` when it
is first asked (the CodeAgent's ``MemoryContext`` is restored from PostgreSQL, as on one machine) and runs a
:class:`StartTurn`, sending every event of the turn to the caller's mailbox (:class:`TurnEvent`) and answering with
:class:`TurnEnded`. :class:`StopTurn` cancels the turn (running code is killed). :class:`RemoteAgentSession` is the
caller's side, with the ``run_stream`` / ``run`` / ``cancel`` / ``close`` of a local
:class:`~agent_memory.agents.AgentSession`, so the terminal chat and the UI stream a remote turn as a local one.

Session workers (``agent-memory runtime worker --role session``) are sharded like executor workers: a user's
sessions live on shard ``sha256(user) % shards``.

Example:
    >>> session_type(1)
    'agent_memory_session_1'
    >>> session_key("alice", "t1") == session_key("alice", "t1") != session_key("alice", "t2")
    True
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

from autogen_agentchat.base import TaskResult
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, MessageFactory
from autogen_core import (
    AgentId,
    AgentInstantiationContext,
    AgentRuntime,
    CancellationToken,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    message_handler,
)
from pydantic import BaseModel

from ._actors import (
    LIVENESS_SECONDS,
    Ping,
    Pong,
    RemoteExecutorUnavailable,
    add_serializers,
    answers,
    mailbox,
    shard_of,
    within,
)
from ._builder import AgentSession
from ._events import AGENT_MEMORY_EVENTS
from ._workspace import safe_path_part

SESSION_TYPE_PREFIX = "agent_memory_session"
TURN_SINK_PREFIX = "agent_memory_turns"
_SINK_KEY = "turns"


class StartTurn(BaseModel):
    """Run one user turn in the session of (user, thread); events go to the ``events_to`` mailbox."""

    turn_id: str
    user_id: str
    thread_id: str
    task: str
    events_to: str


class TurnEvent(BaseModel):
    """One event or message of a turn, as AgentChat dumps it (``type`` names its class)."""

    turn_id: str
    event: dict[str, Any]


class TurnEnded(BaseModel):
    turn_id: str
    stop_reason: str | None = None
    error: str = ""
    cancelled: bool = False


class StopTurn(BaseModel):
    """Stop (the UI's Stop, Ctrl-C): the turn is cancelled and its running code killed."""

    turn_id: str


class CloseSession(BaseModel):
    """The chat ended: the actor releases its team (the saved context stays in PostgreSQL)."""

    user_id: str
    thread_id: str


SESSION_MESSAGE_TYPES: tuple[type[BaseModel], ...] = (StartTurn, TurnEvent, TurnEnded, StopTurn, CloseSession)


def session_type(shard: int) -> str:
    return f"{SESSION_TYPE_PREFIX}_{shard}"


def session_key(user_id: str, thread_id: str) -> str:
    """The actor key of a (user, thread) session: readable, and distinct for distinct pairs."""
    return f"{safe_path_part(user_id)}.{safe_path_part(thread_id)}"


def owns(key: str, user_id: str, thread_id: str) -> bool:
    """Whether an actor key (``session_key``, optionally ``#<instance>``) is the session of this user and thread."""
    return key.split("#", 1)[0] == session_key(user_id, thread_id)


SessionFactory = Callable[[str, str], Awaitable[AgentSession]]


class SessionActor(RoutedAgent):
    """Hosts the team of one (user, thread), built on first use by ``build(user_id, thread_id)``."""

    def __init__(self, build: SessionFactory) -> None:
        super().__init__("runs the agents of one user's thread")
        self._build = build
        self._session: AgentSession | None = None
        self._turns: dict[str, CancellationToken] = {}

    @message_handler
    async def start_turn(self, message: StartTurn, ctx: MessageContext) -> TurnEnded:
        if not owns(self.id.key, message.user_id, message.thread_id):  # the key decides whose session it is
            return TurnEnded(turn_id=message.turn_id, error="this session belongs to another user or thread")
        token = CancellationToken()
        self._turns[message.turn_id] = token
        sink = AgentId(message.events_to, _SINK_KEY)
        try:
            if self._session is None:  # activation: the CodeAgent's MemoryContext comes back from PostgreSQL
                self._session = await self._build(message.user_id, message.thread_id)
            result: TaskResult | None = None
            # to the end of the stream, not just to the result: the team finishes its run (and the after-run
            # hooks, e.g. learning skills, run) before the next turn may start
            async for item in self._session.run_stream(message.task, cancellation_token=token):
                if isinstance(item, TaskResult):
                    result = item
                    continue
                await self.send_message(TurnEvent(turn_id=message.turn_id, event=dict(item.dump())), sink)
            if result is not None:
                return TurnEnded(turn_id=message.turn_id, stop_reason=result.stop_reason)
        except asyncio.CancelledError:
            return TurnEnded(turn_id=message.turn_id, cancelled=True, error="the turn was stopped")
        except Exception as exc:
            return TurnEnded(turn_id=message.turn_id, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._turns.pop(message.turn_id, None)
        return TurnEnded(turn_id=message.turn_id, error="the team ended without a result")

    @message_handler
    async def stop_turn(self, message: StopTurn, ctx: MessageContext) -> Pong:
        token = self._turns.get(message.turn_id)
        if token is not None:
            token.cancel()
        return Pong()

    @message_handler
    async def ping(self, message: Ping, ctx: MessageContext) -> Pong:
        return Pong()

    @message_handler
    async def close_session(self, message: CloseSession, ctx: MessageContext) -> Pong:
        if owns(self.id.key, message.user_id, message.thread_id):
            await self.close()
        return Pong()

    async def close(self) -> None:
        for token in self._turns.values():
            token.cancel()
        if self._session is not None:
            await self._session.close()
            self._session = None


class TurnSink(RoutedAgent):
    """The caller's mailbox for :class:`TurnEvent`: each goes to the queue of its turn."""

    def __init__(self, queues: dict[str, asyncio.Queue[TurnEvent]]) -> None:
        super().__init__("receives the events of remote turns")
        self._queues = queues

    @message_handler
    async def event(self, message: TurnEvent, ctx: MessageContext) -> Pong:
        queue = self._queues.get(message.turn_id)
        if queue is not None:
            queue.put_nowait(message)
        return Pong()


async def turn_sink(runtime: AgentRuntime) -> tuple[str, dict[str, asyncio.Queue[TurnEvent]]]:
    """The agent type session actors send :class:`TurnEvent` to, and the queues of the turns in flight."""
    queues: dict[str, asyncio.Queue[TurnEvent]] = {}
    return await mailbox(runtime, TURN_SINK_PREFIX, queues, TurnSink)


def event_factory() -> MessageFactory:
    """AgentChat's message factory, also knowing agent-memory's own events."""
    factory = MessageFactory()
    for event_type in AGENT_MEMORY_EVENTS:
        if not factory.is_registered(event_type):
            factory.register(event_type)
    return factory


class RemoteAgentSession:
    """The caller's side of a :class:`SessionActor`: streams a remote turn like a local ``AgentSession``."""

    def __init__(self, runtime: AgentRuntime, *, user_id: str, thread_id: str, shards: int = 1,
                 address: str = "", instance: str = "") -> None:  # fmt: skip
        self.runtime = runtime
        self.user_id = user_id
        self.thread_id = thread_id
        self.work_dir: Path | None = None  # on the session worker (known here only on one machine)
        key = session_key(user_id, thread_id) + (f"#{instance}" if instance else "")
        self._recipient = AgentId(session_type(shard_of(user_id, shards)), key)
        self._address = address
        self._factory = event_factory()
        self._token: CancellationToken | None = None
        if hasattr(runtime, "add_message_serializer"):  # a gRPC runtime must know the messages it carries
            add_serializers(runtime, *SESSION_MESSAGE_TYPES)

    async def run_stream(
        self, task: str, cancellation_token: CancellationToken | None = None
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | TaskResult, None]:
        """Run one user turn on the session worker, yielding its events and messages, then the TaskResult."""
        token = cancellation_token or CancellationToken()
        self._token = token
        sink_type, queues = await turn_sink(self.runtime)
        turn_id = uuid.uuid4().hex
        queue: asyncio.Queue[TurnEvent] = asyncio.Queue()
        queues[turn_id] = queue
        await self._alive("the turn was not run")
        start = StartTurn(turn_id=turn_id, user_id=self.user_id, thread_id=self.thread_id, task=task,
                          events_to=sink_type)  # fmt: skip
        sent = asyncio.ensure_future(self.runtime.send_message(start, self._recipient))
        stops: list[asyncio.Future[None]] = []
        token.add_callback(lambda: stops.append(asyncio.ensure_future(self._stop(turn_id))))
        messages: list[BaseAgentEvent | BaseChatMessage] = []
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait({getter, sent}, timeout=LIVENESS_SECONDS,
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                if getter in done:
                    item = self._factory.create(getter.result().event)
                    messages.append(item)
                    yield item
                    continue
                getter.cancel()
                if sent in done:
                    break
                await self._alive("the turn was lost")  # a session worker that died fails the turn within seconds
            while not queue.empty():  # every event was delivered before the answer
                item = self._factory.create(queue.get_nowait().event)
                messages.append(item)
                yield item
            ended = sent.result()
        finally:
            queues.pop(turn_id, None)
            self._token = None
            if not sent.done():  # stopped or abandoned: the turn ends on the worker before this returns
                await self._stop(turn_id)
                await asyncio.wait({sent}, timeout=30)
                sent.cancel()
        if not isinstance(ended, TurnEnded):
            raise RemoteExecutorUnavailable(f"the session worker answered {type(ended).__name__}")
        if ended.cancelled:
            raise asyncio.CancelledError
        if ended.error:
            raise RuntimeError(ended.error)
        yield TaskResult(messages=messages, stop_reason=ended.stop_reason)

    async def run(self, task: str, cancellation_token: CancellationToken | None = None) -> TaskResult:
        result: TaskResult | None = None
        async for item in self.run_stream(task, cancellation_token):
            if isinstance(item, TaskResult):
                result = item
        assert result is not None
        return result

    def cancel(self) -> None:
        if self._token is not None:
            self._token.cancel()

    async def close(self) -> None:
        """The chat ended: the actor releases the team (its context stays saved for a later turn or worker)."""
        try:
            await within(self.runtime.send_message(CloseSession(user_id=self.user_id, thread_id=self.thread_id),
                                                   self._recipient), 10)  # fmt: skip
        except Exception:  # the worker is gone: so is the team
            pass

    async def _stop(self, turn_id: str) -> None:
        try:
            await within(self.runtime.send_message(StopTurn(turn_id=turn_id), self._recipient), 10)
        except Exception:  # the worker is gone: its runs died with it
            pass

    async def _alive(self, consequence: str) -> None:
        await answers(self.runtime, self._recipient, lambda exc: RemoteExecutorUnavailable(
            f"{consequence}: no session worker answers for {self._recipient.type} ({type(exc).__name__}). Start one "
            f"with `agent-memory runtime worker --role session --connect {self._address or 'HOST:PORT'}`"))  # fmt: skip


class LocalSessions:
    """Single-machine mode: the same :class:`SessionActor` s, on AutoGen's in-process runtime.

    ``open`` hands a team built here (by the CLI or the UI, with their own builder) to a session actor of its
    user and thread, and returns the :class:`RemoteAgentSession` that talks to it, as on a distributed runtime.
    """

    def __init__(self) -> None:
        self.runtime = SingleThreadedAgentRuntime()
        self._teams: dict[str, AgentSession] = {}
        self._started: asyncio.Future[None] | None = None

    def _actor(self) -> SessionActor:
        # the team of the chat this actor was opened for, handed over once (a closed chat is not rebuilt)
        teams = [t for t in [self._teams.pop(AgentInstantiationContext.current_agent_id().key, None)] if t]

        async def build(user_id: str, thread_id: str) -> AgentSession:
            if not teams:
                raise LookupError("this chat was closed; open it again")
            return teams.pop()

        return SessionActor(build)

    async def _start(self) -> None:
        await SessionActor.register(self.runtime, session_type(0), self._actor)
        self.runtime.start()

    async def open(self, team: AgentSession) -> RemoteAgentSession:
        """The actor-backed session for ``team``: each chat (a browser tab, a terminal) gets its own actor
        instance, as it had its own team before, so two tabs on one thread never share or close each other's."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await asyncio.shield(self._started)
        instance = uuid.uuid4().hex
        self._teams[f"{session_key(team.user_id, team.thread_id)}#{instance}"] = team
        session = RemoteAgentSession(self.runtime, user_id=team.user_id, thread_id=team.thread_id, instance=instance)
        session.work_dir = team.work_dir
        return session

    async def stop(self) -> None:
        if self._started is not None:
            await self.runtime.stop_when_idle()
