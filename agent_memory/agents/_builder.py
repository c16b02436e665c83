"""AgentBuilder: the CodeAgent + executor team for one user and thread, built from a declarative spec.

``AgentBuilder(store, user_id).build(thread_id)`` returns an :class:`AgentSession`: an AgentChat team
(``SelectorGroupChat`` with a deterministic speaker rule by default, or ``RoundRobinGroupChat``) running on
autogen-core's runtime (the embedded ``SingleThreadedAgentRuntime`` unless ``runtime=`` is given, which
keeps the door open for a distributed runtime), with termination (``TERMINATE`` from the coder, or a
coder reply without code = a question for the user), ``max_turns`` and cancellation.

Every part has a ``build_*`` method a subclass can override. The important hook is
:meth:`AgentBuilder.build_model_context`: the base builds a :class:`~agent_memory.MemoryContext` for the
user and thread (resuming its saved state); a UI builder overrides it to pass its own identifiers, a
different budget or a memory model.

Event stream (``session.run_stream(task)``), in order, as AgentChat produces them:

=================================  ===============================================================
``TextMessage`` (source ``user``)   the task
``ToolCallRequestEvent``            the coder calls tools; ``retrieve_memory`` / ``search_memory`` = recall
``ToolCallExecutionEvent``          tool results (already capped views of the store)
``TextMessage`` (coder)             code to run, or the final answer (ends with ``TERMINATE``)
``MemoryStoredEvent`` (executor)    a big output was stored: key, description, tokens, placeholder
``MemoryContextEvent`` (coder)      the coder's MemoryContext stored / expanded / recalled memory
``CodeExecutionEvent`` (executor)   exit code and the compact text the team sees
``TextMessage`` (executor)          status + output, or placeholder + excerpt + status
``ModelClientStreamingChunkEvent``  only with ``model_client_stream`` in the spec
``TaskResult``                      last item: all messages and ``stop_reason``
=================================  ===============================================================

Example:
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.agents import AgentBuilder
    >>> async def main() -> None:
    ...     store = await MemoryStore.open()
    ...     session = await AgentBuilder(store, "alice").build(thread_id="t1")
    ...     async for event in session.run_stream("How many lines does /etc/services have?"):
    ...         print(type(event).__name__)
    ...     await session.close()
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import Any

from autogen_agentchat.base import TaskResult, TerminationCondition
from autogen_agentchat.conditions import FunctionalTermination, TextMentionTermination
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, TextMessage
from autogen_agentchat.teams import BaseGroupChat, RoundRobinGroupChat, SelectorGroupChat
from autogen_core import AgentRuntime, CancellationToken
from autogen_core.code_executor import CodeExecutor
from autogen_core.memory import Memory
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import ChatCompletionClient
from autogen_core.tools import BaseTool

from ..config import get_settings
from ..context import MemoryContext
from ..placeholders import parse_memory_refs
from ..store import MemoryStore
from ..tokens import count_tokens
from ..tools import memory_tools
from ..validation import check_user_id
from ._actors import RemoteCodeExecutor
from ._code_agent import CODE_AGENT_SYSTEM_MESSAGE, CodeAgent
from ._events import AGENT_MEMORY_EVENTS, MemoryContextEvent
from ._executor import ExecutorAgent, LocalProcessGroupExecutor
from ._model_config import load_memory_model_client, load_model_client
from ._spec import DEFAULT_TEAM_SPEC, TeamSpec
from ._workspace import safe_path_part, user_work_root

_CODE_BLOCK_RE = re.compile(r"```[ \t]*(python|py|bash|sh|shell)[ \t]*\n", re.IGNORECASE)
REQUEST_OVERHEAD_TOKENS = 64  # per-message framing and the reply priming the API adds around the context


class BuilderHook:
    """A plug-in of every :class:`AgentBuilder`: extends the coder, sees the team's executor, follows each run.

    Hooks import the builder and register with :func:`register_builder_hook`; the builder never imports them
    (the skills hook, ``agents/_skills_hook.py``, is one). Each method's default does nothing.
    """

    def code_agent_parts(
        self, builder: AgentBuilder, agent_name: str, thread_id: str, tools: list[BaseTool[Any, Any]], prompt: str
    ) -> tuple[list[BaseTool[Any, Any]], str]:
        """The coder's tools and system prompt, extended."""
        return tools, prompt

    def code_agent_memory(self, builder: AgentBuilder, agent_name: str, thread_id: str) -> list[Memory]:
        """AutoGen ``Memory`` objects for the coder (they may add to its context before each model call)."""
        return []

    def executor_ready(self, builder: AgentBuilder, agent_name: str, thread_id: str, executor: CodeExecutor) -> None:
        """The team's code executor, once built."""

    async def after_run(self, session: AgentSession, task: str | BaseChatMessage, result: TaskResult) -> None:
        """Called after each run of a session, with its result."""


BUILDER_HOOKS: list[BuilderHook] = []


def register_builder_hook(hook: BuilderHook) -> None:
    """Plug ``hook`` into every AgentBuilder (once)."""
    if hook not in BUILDER_HOOKS:
        BUILDER_HOOKS.append(hook)


def has_code_block(text: str) -> bool:
    """True when ``text`` holds a fenced block the executor can run."""
    return _CODE_BLOCK_RE.search(text) is not None


class AgentSession:
    """A built team for one (user, thread): run it, stream it, cancel it, close it.

    ``run_stream`` yields AgentChat events and messages, then the ``TaskResult``. Runs continue the same
    conversation (the agents keep their contexts). ``cancel()`` (or cancelling the token you pass) stops
    the run; a running command's whole process tree is killed.
    """

    def __init__(
        self,
        *,
        team: BaseGroupChat,
        code_agent: CodeAgent,
        executor_agent: ExecutorAgent,
        model_context: ChatCompletionContext,
        code_executor: CodeExecutor,
        user_id: str,
        thread_id: str,
        work_dir: Path | None,
    ) -> None:
        self.team = team
        self.code_agent = code_agent
        self.executor_agent = executor_agent
        self.model_context = model_context
        self.code_executor = code_executor
        self.user_id = user_id
        self.thread_id = thread_id
        self.work_dir = work_dir
        self._token: CancellationToken | None = None
        self._started = False

    async def start(self) -> None:
        if not self._started:
            await self.code_executor.start()
            self._started = True

    async def run_stream(
        self, task: str | BaseChatMessage, cancellation_token: CancellationToken | None = None
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | TaskResult, None]:
        """Run one user turn, yielding every event and message, then the :class:`TaskResult`."""
        await self.start()
        token = cancellation_token or CancellationToken()
        self._token = token
        seen = {id(e) for e in self._context_entries()}
        try:
            async for item in self.team.run_stream(task=task, cancellation_token=token):
                for event in self._new_context_events(seen):
                    yield event
                yield item
                if isinstance(item, TaskResult):  # e.g. learn skills from the run (agents/_skills_hook.py)
                    for hook in BUILDER_HOOKS:
                        await hook.after_run(self, task, item)
        finally:
            self._token = None

    def _context_entries(self) -> list[Any]:
        return list(self.model_context.entries) if isinstance(self.model_context, MemoryContext) else []

    def _new_context_events(self, seen: set[int]) -> list[MemoryContextEvent]:
        """What the coder's MemoryContext did since the last look (offloads, expansions, recall notes)."""
        events: list[MemoryContextEvent] = []
        source = self.code_agent.name
        for entry in self._context_entries():
            if id(entry) in seen:
                continue
            seen.add(id(entry))
            content = entry.message.content if isinstance(getattr(entry.message, "content", None), str) else ""
            if entry.kind == "expansion":
                keys = [r.key for r in parse_memory_refs(content)]
                events.append(MemoryContextEvent(source=source, action="expanded", memory_keys=keys))
            elif entry.kind == "recall":
                keys = [r.key for r in parse_memory_refs(content)]
                events.append(MemoryContextEvent(source=source, action="recalled", memory_keys=keys))
            else:
                keys = [p.key for p in entry.parts if p.key]
                if keys:
                    detail = "; ".join(f"{p.description} ({p.tokens} tokens)" for p in entry.parts if p.key)
                    events.append(MemoryContextEvent(source=source, action="stored", memory_keys=keys, detail=detail))
        return events

    async def run(self, task: str | BaseChatMessage, cancellation_token: CancellationToken | None = None) -> TaskResult:
        result: TaskResult | None = None
        async for item in self.run_stream(task, cancellation_token):
            if isinstance(item, TaskResult):
                result = item
        assert result is not None, "the team produced no TaskResult"
        return result

    def cancel(self) -> None:
        """Cancel the running turn (no-op when idle)."""
        if self._token is not None:
            self._token.cancel()

    async def close(self) -> None:
        """Stop the code executor (a Docker container is removed) and release the context's resources."""
        if self._started:
            await self.code_executor.stop()
            self._started = False
        if isinstance(self.model_context, MemoryContext):
            await self.model_context.close()


class AgentBuilder:
    """Builds the agents and the team for ``user_id`` from a :class:`TeamSpec`.

    Args:
        store: the memory store (shared; everything is scoped to ``user_id``).
        user_id: whose memory the agents use.
        spec: the team spec (default :data:`DEFAULT_TEAM_SPEC`); see :meth:`from_spec_source`.
        model_client: the agents' model (default: :func:`load_model_client` from the environment).
        memory_model_client: optional lightweight model for MemoryContext (default: from the environment).
        home: state directory for work directories (default ``AGENT_MEMORY_HOME``).
        runtime: an autogen-core ``AgentRuntime`` for the team (default: the team's embedded one).

    Subclass hooks: :meth:`build_model_context` (most common), :meth:`build_model_client`,
    :meth:`build_code_executor`, :meth:`build_tools`, :meth:`build_code_agent`, :meth:`build_executor_agent`,
    :meth:`build_termination`, :meth:`build_team`.

    Example:
        >>> class MyBuilder(AgentBuilder):
        ...     async def build_model_context(self, *, agent_name, thread_id, reserved_tokens):
        ...         ctx = await super().build_model_context(agent_name=agent_name, thread_id=thread_id,
        ...                                                 reserved_tokens=reserved_tokens)
        ...         return ctx
    """

    def __init__(
        self,
        store: MemoryStore,
        user_id: str,
        *,
        spec: TeamSpec | None = None,
        model_client: ChatCompletionClient | None = None,
        memory_model_client: ChatCompletionClient | None = None,
        home: str | Path | None = None,
        runtime: AgentRuntime | None = None,
        executor_runtime: AgentRuntime | None = None,
        executor_shards: int = 1,
    ) -> None:
        self.store = store
        self.user_id = check_user_id(user_id)
        self.spec = spec or DEFAULT_TEAM_SPEC
        self._model_client = model_client
        self._memory_model_client = memory_model_client
        self.home = Path(home).expanduser() if home is not None else get_settings().resolved_home()
        self.runtime = runtime
        # Code runs on ExecutorActors of this runtime (executor workers, possibly on other machines) when given.
        self.executor_runtime = executor_runtime
        self.executor_shards = executor_shards

    @staticmethod
    async def load_spec(store: MemoryStore, source: str | None) -> TeamSpec:
        """A spec from ``source``: None -> the default; an existing file path -> that file; else the name of
        a row in the ``agents`` table."""
        if source is None:
            return DEFAULT_TEAM_SPEC
        if Path(source).expanduser().is_file():  # noqa: ASYNC240 (a stat, once, at start-up)
            return TeamSpec.from_file(source)
        return await TeamSpec.from_db(store, source)

    # ------------------------------------------------------------------ hooks

    def build_model_client(self) -> ChatCompletionClient:
        if self._model_client is None:
            self._model_client = load_model_client()
        return self._model_client

    def build_memory_model_client(self) -> ChatCompletionClient | None:
        if self._memory_model_client is None:
            self._memory_model_client = load_memory_model_client()
        return self._memory_model_client

    async def build_model_context(
        self, *, agent_name: str, thread_id: str, reserved_tokens: int
    ) -> ChatCompletionContext:
        """The CodeAgent's context: a MemoryContext for this user and thread, resumed from its saved state.

        ``reserved_tokens`` is what each request carries besides the context (system prompt, tool schemas),
        so the context's own budget is the spec's request budget minus that.
        """
        spec = self.spec.context
        budget = None if spec.token_budget is None else max(500, spec.token_budget - reserved_tokens)
        context = MemoryContext(
            store=self.store,
            user_id=self.user_id,
            agent_id=agent_name,
            thread_id=thread_id,
            offload_threshold_tokens=spec.offload_threshold_tokens,
            token_budget=budget,
            model_client=self.build_memory_model_client(),
            first_use_max_tokens=spec.first_use_max_tokens,
            keep_recent_full=spec.keep_recent_full,
        )
        await context.load()  # a resumed thread gets its placeholders back; a new one starts empty
        return context

    def work_dir(self, thread_id: str) -> Path:
        """Per-user, per-thread directory where code runs: ``$AGENT_MEMORY_HOME/work/<user>/<thread>``."""
        return user_work_root(self.home, self.user_id) / safe_path_part(thread_id)

    def build_code_executor(self, thread_id: str) -> CodeExecutor:
        """Local process-group executor in :meth:`work_dir`; Docker when the spec (or
        ``AGENT_MEMORY_EXECUTOR=docker``) asks for it."""
        spec = self.spec.executor
        if self.executor_runtime is not None:  # the executor workers run it, in their sandboxes
            return RemoteCodeExecutor(
                self.executor_runtime, user_id=self.user_id, thread_id=thread_id, shards=self.executor_shards,
                timeout_seconds=spec.timeout_seconds,
            )  # fmt: skip
        kind = os.environ.get("AGENT_MEMORY_EXECUTOR", spec.kind)
        work_dir = self.work_dir(thread_id)
        if kind == "docker":
            work_dir.mkdir(parents=True, exist_ok=True)
            try:
                from autogen_ext.code_executors.docker import DockerCommandLineCodeExecutor
            except ImportError as exc:
                raise RuntimeError(
                    "the Docker executor needs the docker package: pip install 'autogen-ext[docker]'"
                ) from exc
            return DockerCommandLineCodeExecutor(
                image=spec.docker_image, timeout=spec.timeout_seconds, work_dir=work_dir, auto_remove=True
            )
        if kind != "local":
            raise ValueError(f"AGENT_MEMORY_EXECUTOR={kind!r}: use local or docker")
        return LocalProcessGroupExecutor(
            timeout=spec.timeout_seconds,
            work_dir=work_dir,
            max_output_bytes=spec.max_output_bytes,
            sandbox=spec.sandbox_policy(),
            owner=self.user_id,
            home=self.home,
        )

    def build_tools(self, *, agent_name: str, thread_id: str) -> list[BaseTool[Any, Any]]:
        if not self.spec.code_agent.memory_tools:
            return []
        return list(memory_tools(self.store, self.user_id, agent_id=agent_name, thread_id=thread_id))

    async def build_code_agent(self, thread_id: str) -> CodeAgent:
        spec = self.spec.code_agent
        tools = self.build_tools(agent_name=spec.name, thread_id=thread_id)
        prompt = spec.system_message if spec.system_message is not None else CODE_AGENT_SYSTEM_MESSAGE
        if spec.extra_instructions:
            prompt = f"{prompt.rstrip()}\n\n{spec.extra_instructions.strip()}\n"
        for hook in BUILDER_HOOKS:  # e.g. learned skills (agents/_skills_hook.py); off by default
            tools, prompt = hook.code_agent_parts(self, spec.name, thread_id, tools, prompt)
        memory = [m for hook in BUILDER_HOOKS for m in hook.code_agent_memory(self, spec.name, thread_id)]
        reserved = (
            count_tokens(prompt) + sum(count_tokens(json.dumps(t.schema)) for t in tools) + REQUEST_OVERHEAD_TOKENS
        )
        context = await self.build_model_context(agent_name=spec.name, thread_id=thread_id, reserved_tokens=reserved)
        return CodeAgent(
            spec.name,
            self.build_model_client(),
            model_context=context,
            tools=tools,
            system_message=prompt,
            max_tool_iterations=spec.max_tool_iterations,
            model_client_stream=spec.model_client_stream,
            memory=memory or None,  # e.g. learned-skill hints; none when no hook adds any
        )

    def build_executor_agent(self, thread_id: str, code_executor: CodeExecutor) -> ExecutorAgent:
        spec = self.spec.executor
        # What the executor posts must stay below the coder's offload threshold (no double storing).
        excerpt_tokens = min(spec.excerpt_tokens, max(20, self.spec.context.offload_threshold_tokens // 2))
        return ExecutorAgent(
            spec.name,
            code_executor,
            store=self.store,
            user_id=self.user_id,
            thread_id=thread_id,
            offload_threshold_tokens=self.spec.context.offload_threshold_tokens,
            excerpt_tokens=excerpt_tokens,
            sources=[self.spec.code_agent.name],  # only the coder's code runs, never code pasted by the user
        )

    def build_termination(self) -> TerminationCondition:
        """Stop on ``TERMINATE`` from the coder, or when the coder replies without code (it answers or asks)."""
        coder = self.spec.code_agent.name

        def coder_replied_without_code(messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> bool:
            return any(
                isinstance(m, TextMessage) and m.source == coder and not has_code_block(m.content) for m in messages
            )

        return TextMentionTermination(self.spec.termination_text, sources=[coder]) | FunctionalTermination(
            coder_replied_without_code
        )

    def build_team(self, code_agent: CodeAgent, executor_agent: ExecutorAgent) -> BaseGroupChat:
        spec = self.spec
        common: dict[str, Any] = {
            "termination_condition": self.build_termination(),
            "max_turns": spec.max_turns,
            "runtime": self.runtime,
            "custom_message_types": list(AGENT_MEMORY_EVENTS),
        }
        if spec.team == "round_robin":
            return RoundRobinGroupChat([code_agent, executor_agent], **common)

        coder, executor = code_agent.name, executor_agent.name

        def next_speaker(messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> str:
            # Deterministic: code from the coder goes to the executor; everything else back to the coder.
            for message in reversed(messages):
                if isinstance(message, BaseChatMessage):
                    if message.source == coder and has_code_block(message.to_model_text()):
                        return executor
                    return coder
            return coder

        return SelectorGroupChat(
            [code_agent, executor_agent],
            model_client=self.build_model_client(),  # unused: the selector function always decides
            selector_func=next_speaker,
            allow_repeated_speaker=True,
            **common,
        )

    async def build(self, thread_id: str | None = None) -> AgentSession:
        """Build the whole team for ``thread_id`` (a new random thread when None)."""
        thread_id = thread_id or uuid.uuid4().hex
        code_executor = self.build_code_executor(thread_id)
        code_agent = await self.build_code_agent(thread_id)
        for hook in BUILDER_HOOKS:  # e.g. learned skills run in this same sandbox
            hook.executor_ready(self, self.spec.code_agent.name, thread_id, code_executor)
        executor_agent = self.build_executor_agent(thread_id, code_executor)
        team = self.build_team(code_agent, executor_agent)
        work_dir = getattr(code_executor, "work_dir", None)
        return AgentSession(
            team=team,
            code_agent=code_agent,
            executor_agent=executor_agent,
            model_context=code_agent.model_context,
            code_executor=code_executor,
            user_id=self.user_id,
            thread_id=thread_id,
            work_dir=work_dir if isinstance(work_dir, Path) else None,
        )
