"""The executor: runs the CodeAgent's code blocks and stores big outputs itself, before any agent sees them.

Two parts:

* :class:`LocalProcessGroupExecutor` — AutoGen's ``LocalCommandLineCodeExecutor`` with what a chat that
  runs model-written code needs: every block runs in its own process group (``start_new_session``), so a
  timeout or a cancellation kills the *whole tree* (``bash -c 'sleep 999 &'`` included), not just the
  direct child as AutoGen's executor does; stdout and stderr are captured interleaved, as a terminal shows
  them, up to ``max_output_bytes`` (the rest is drained and counted, never buffered).
* :class:`ExecutorAgent` — an AgentChat ``CodeExecutorAgent`` that, when an output is bigger than
  ``offload_threshold_tokens``, stores the exact output through the context wing's one offloader
  (:class:`~agent_memory.context.Offloader`: same description, excerpt and placeholder as MemoryContext;
  ``command_output``, metadata: code, language, exit code, duration, thread) and posts only the placeholder
  + a short excerpt + the exit status, so no agent of the team (nor the UI reading the event stream)
  receives the raw output; a :class:`MemoryStoredEvent` marks the moment it was stored. While the database
  is unreachable the offloader's one rule applies: the output is kept inline (posted as a small output
  is) and the coder's MemoryContext offloads it once the database is back. When the store refuses the
  output (over its size limit) or fails otherwise, the team gets the status, the excerpt and why it was
  not stored, never the raw output, and the run goes on.

Example:
    >>> from agent_memory.agents._executor import ExecutorAgent, LocalProcessGroupExecutor
    >>> code_executor = LocalProcessGroupExecutor(work_dir="/tmp/am-work", timeout=60)  # doctest: +SKIP
    >>> executor = ExecutorAgent("executor", code_executor, store=store, user_id="alice")  # doctest: +SKIP
    >>> # in a team after the CodeAgent: runs ```bash / ```python blocks of the previous message
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import warnings
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from hashlib import sha256
from inspect import iscoroutinefunction
from pathlib import Path
from typing import Any, Self

from autogen_agentchat.agents import ApprovalFuncType, ApprovalRequest, ApprovalResponse, CodeExecutorAgent
from autogen_agentchat.base import Response
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, CodeExecutionEvent, TextMessage
from autogen_core import CancellationToken, Component
from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult
from autogen_ext.code_executors._common import PYTHON_VARIANTS, CommandLineCodeResult, silence_pip
from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor
from pydantic import BaseModel

from ..config import get_settings
from ..context import OffloadedPart, Offloader, Refused
from ..placeholders import format_memory_ref
from ..store import MemoryStore
from ._disk_guard import DISK_QUOTA_EXIT_CODE, DiskGuard, DiskLimits
from ._events import MemoryStoredEvent
from ._process_run import TIMEOUT_EXIT_CODE, run_program
from ._progress import LiveOutput, OutputTail, status_line, while_running
from ._sandbox import (
    INSTALL_HINT,
    SandboxedCommand,
    SandboxPolicy,
    SandboxUnavailable,
    block_file_name,
    block_program,
    limit_args,
    prepare_work_dir,
    sandbox_environment,
    sandbox_uid,
    sandboxed_command,
    tasks_of_uid,
)
from ._workspace import user_work_root

log = logging.getLogger(__name__)

DEFAULT_MAX_OUTPUT_BYTES = 20 * 1024 * 1024
# Longest storage error message posted to the team (the log has it in full, with its traceback).
_ERROR_NOTE_CHARS = 300
SANDBOX_UNAVAILABLE_EXIT_CODE = 126  # like a shell's "cannot execute"


@dataclass
class ExecutionResult(CommandLineCodeResult):
    """A :class:`CommandLineCodeResult` with what the executor measured."""

    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    output_bytes: int = 0
    languages: tuple[str, ...] = ()
    not_utf8: bool = False


class LocalProcessGroupExecutorConfig(BaseModel):
    """Configuration for :class:`LocalProcessGroupExecutor`."""

    timeout: int = 60
    work_dir: str | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    cleanup_temp_files: bool = True
    extra_env: dict[str, str] = {}
    sandbox: SandboxPolicy = SandboxPolicy()
    owner: str | None = None
    home: str | None = None


def _decode(raw: bytes, *, truncated: bool) -> tuple[str, bool]:
    """(text, not_utf8). Binary output is shown (and stored) with ``\\xNN`` escapes, and flagged; a cap that
    cut a multi-byte character in half only drops that partial character."""
    for cut in range(4 if truncated else 1):
        try:
            return raw[: len(raw) - cut].decode("utf-8"), False
        except UnicodeDecodeError:
            continue
    return raw.decode("utf-8", errors="backslashreplace"), True


class LocalProcessGroupExecutor(LocalCommandLineCodeExecutor, Component[LocalProcessGroupExecutorConfig]):
    """Runs code blocks in the bubblewrap sandbox (:mod:`agent_memory.agents._sandbox`) and kills the whole run on
    timeout or cancellation.

    Blocks run in order in ``work_dir``; the first failing block stops the run (like AutoGen's executor).
    Output beyond ``max_output_bytes`` is discarded but counted, and the result says so. ``owner`` (the chat
    user) decides the uid code runs as when this process is root; ``sandbox`` sets isolation, network and limits.
    When the sandbox cannot be set up the block is not run and the result says what to install.

    Example:
        >>> import asyncio
        >>> from autogen_core import CancellationToken
        >>> from autogen_core.code_executor import CodeBlock
        >>> ex = LocalProcessGroupExecutor(timeout=5, owner="alice")
        >>> r = asyncio.run(ex.execute_code_blocks([CodeBlock("echo hi", "bash")], CancellationToken()))
        >>> (r.exit_code, r.output)
        (0, 'hi\\n')
    """

    component_config_schema = LocalProcessGroupExecutorConfig  # type: ignore[assignment]
    component_provider_override = "agent_memory.agents.LocalProcessGroupExecutor"

    def __init__(
        self,
        timeout: int = 60,
        work_dir: Path | str | None = None,
        *,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        cleanup_temp_files: bool = True,
        extra_env: dict[str, str] | None = None,
        sandbox: SandboxPolicy | None = None,
        owner: str | None = None,
        home: Path | str | None = None,
    ) -> None:
        if work_dir is not None:
            Path(work_dir).parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # The "runs code on this machine" warning is the point of this class; the chat says so itself.
            warnings.simplefilter("ignore", UserWarning)
            super().__init__(timeout=timeout, work_dir=work_dir, cleanup_temp_files=cleanup_temp_files)
        if max_output_bytes < 1:
            raise ValueError("max_output_bytes must be at least 1")
        self._max_output_bytes = max_output_bytes
        self._extra_env = dict(extra_env or {})
        self._sandbox = sandbox or SandboxPolicy()
        self._owner = owner
        self._home = Path(home).expanduser() if home is not None else None
        self._uid: int | None = None
        self.output_tail: OutputTail | None = None  # fed each chunk as it arrives (live progress)

    @property
    def max_output_bytes(self) -> int:
        return self._max_output_bytes

    @property
    def sandbox(self) -> SandboxPolicy:
        return self._sandbox

    async def sandbox_uid(self) -> int | None:
        """The uid code runs as when this process is root (one per owner, recorded), else None."""
        if os.geteuid() != 0 or self._sandbox.isolation == "none":
            return None
        if self._uid is None:
            home = self._home or get_settings().resolved_home()
            owner = self._owner or f"dir:{self.work_dir}"  # work_dir is already absolute
            self._uid = await asyncio.to_thread(sandbox_uid, home, owner)
        return self._uid

    def _disk_guard(self) -> DiskGuard | None:
        """The quota of the owner's files (all their threads' directories) and the disk's reserve; none unisolated."""
        if self._sandbox.isolation == "none":
            return None
        work_dir = Path(self.work_dir)
        root = work_dir
        if self._owner is not None:
            owner_root = user_work_root(self._home or get_settings().resolved_home(), self._owner)
            root = owner_root if work_dir.parent == owner_root else work_dir
        mb, policy = 1024 * 1024, self._sandbox
        limits = DiskLimits(policy.work_quota_mb * mb, policy.work_max_files, policy.disk_reserve_mb * mb)
        return DiskGuard(root, limits)

    async def _command(self, lang: str, code: str, filename: str | None) -> SandboxedCommand:
        work_dir = Path(self.work_dir)
        uid = await self.sandbox_uid()
        ext = "py" if lang == "python" else ("ps1" if lang in ("pwsh", "powershell", "ps1") else lang)
        env = sandbox_environment(self._sandbox, str(work_dir), self._extra_env)
        program = block_program(lang, filename)
        if self._sandbox.isolation == "none":
            # Explicitly unisolated (single trusted user): the file lives in the work dir, as in AutoGen.
            await asyncio.to_thread(work_dir.mkdir, parents=True, exist_ok=True)
            path = work_dir / (filename or f"tmp_code_{sha256(code.encode()).hexdigest()}.{ext}")
            await asyncio.to_thread(path.write_text, code, encoding="utf-8")
            argv = [part.replace("{code}", str(path)) for part in block_program(lang, None)]
            headroom = await asyncio.to_thread(tasks_of_uid, os.getuid())
            prlimit = ["prlimit", *limit_args(self._sandbox, headroom), "--"]
            return SandboxedCommand([*prlimit, *argv], cleanup=[path] if filename is None else [])
        fd = await asyncio.to_thread(prepare_work_dir, work_dir, uid)
        try:
            command = sandboxed_command(
                self._sandbox,
                work_dir=work_dir,
                work_dir_fd=fd,
                uid=uid,
                code=code.encode("utf-8"),
                code_name=f"block.{ext}",
                program=program,
                env=env,
            )
        except BaseException:
            os.close(fd)
            raise
        command.close_after_start.append(fd)
        return command

    async def _execute_code_dont_check_setup(
        self, code_blocks: list[CodeBlock], cancellation_token: CancellationToken
    ) -> ExecutionResult:
        started = time.monotonic()
        chunks: list[bytes] = []
        kept = 0
        total = 0
        exit_code = 0
        timed_out = False
        file_names: list[Path] = []
        languages: list[str] = []
        try:
            for block in code_blocks:
                lang = block.language.lower()
                code = silence_pip(block.code, lang)
                if lang in PYTHON_VARIANTS:
                    lang = "python"
                languages.append(lang)
                if lang not in self.SUPPORTED_LANGUAGES:
                    exit_code = 1
                    chunks.append(f"unknown language {lang}\n".encode())
                    break
                try:
                    filename = block_file_name(code, self.work_dir)
                except ValueError:
                    exit_code = 1
                    chunks.append(b"Filename is not in the workspace\n")
                    break
                disk = self._disk_guard()
                refused, disk_note = await disk.before_run() if disk is not None else (None, None)
                if refused is not None:
                    exit_code = DISK_QUOTA_EXIT_CODE
                    chunks.append(f"Not run: {refused}\n".encode())
                    log.warning("code of %s not run: %s", self._owner, refused)
                    break
                try:
                    command = await self._command(lang, code, filename)
                except SandboxUnavailable as exc:
                    exit_code = SANDBOX_UNAVAILABLE_EXIT_CODE
                    chunks.append(f"Not run: {exc}\n".encode())
                    log.error("code not run: %s", exc)
                    break
                if filename is None:
                    file_names.extend(command.cleanup)
                try:
                    ran = await run_program(
                        command, limit_s=self._timeout, cap=self._max_output_bytes - kept, token=cancellation_token,
                        output_tail=self.output_tail, disk=disk,
                    )  # fmt: skip
                finally:
                    if disk is not None:
                        disk.after_run()
                code_rc, block_timed_out, data, block_total = ran.exit_code, ran.timed_out, ran.kept, ran.total
                if disk_note is not None and code_rc != DISK_QUOTA_EXIT_CODE:  # else "Stopped:" says it, newer
                    data += f"\n{disk_note}\n".encode()
                if note := await asyncio.to_thread(command.release):  # its cgroup, and whether memory ran out
                    data += f"\n{note}\n".encode()
                if code_rc == 1 and data.startswith(b"bwrap: ") and self._sandbox.isolation != "none":
                    # bubblewrap itself failed (no namespaces in this container, say): the code never ran.
                    code_rc = SANDBOX_UNAVAILABLE_EXIT_CODE
                    data = f"Not run: the sandbox could not be set up: {data.decode(errors='replace').strip()}; " \
                        f"{INSTALL_HINT}\n".encode()  # fmt: skip
                    log.error("code not run: %s", data.decode().strip())
                chunks.append(data)
                kept += len(data)
                total += block_total
                exit_code = code_rc
                if block_timed_out:
                    timed_out = True
                    break
                if exit_code != 0:
                    break
        finally:
            if self._cleanup_temp_files:
                for file in file_names:
                    with contextlib.suppress(OSError):
                        file.unlink(missing_ok=True)
        output, not_utf8 = _decode(b"".join(chunks), truncated=total > kept)
        if timed_out:
            output += f"\nTimeout: the run was killed after {self._timeout}s\n"
        return ExecutionResult(
            exit_code=exit_code,
            output=output,
            code_file=None,
            duration_s=round(time.monotonic() - started, 3),
            timed_out=timed_out,
            truncated=total > kept,
            output_bytes=total,
            languages=tuple(languages),
            not_utf8=not_utf8,
        )

    def _to_config(self) -> LocalProcessGroupExecutorConfig:  # type: ignore[override]
        return LocalProcessGroupExecutorConfig(
            timeout=self._timeout,
            work_dir=str(self._work_dir) if self._work_dir is not None else None,
            max_output_bytes=self._max_output_bytes,
            cleanup_temp_files=self._cleanup_temp_files,
            extra_env=self._extra_env,
            sandbox=self._sandbox,
            owner=self._owner,
            home=str(self._home) if self._home is not None else None,
        )

    @classmethod
    def _from_config(cls, config: LocalProcessGroupExecutorConfig) -> Self:  # type: ignore[override]
        return cls(**config.model_dump(exclude={"sandbox"}), sandbox=config.sandbox)


EXECUTOR_DESCRIPTION = (
    "Runs the python and bash code blocks of the previous message and reports the exit status; large outputs "
    "are stored in memory and shown as a [MemoryRef: ...]."
)


class ExecutorAgent(CodeExecutorAgent):
    """Runs code blocks from the conversation; big outputs go to memory, the team sees a placeholder.

    Args:
        name: agent name in the team.
        code_executor: any AutoGen ``CodeExecutor`` (``LocalProcessGroupExecutor``, Docker...).
        store: the memory store; outputs above ``offload_threshold_tokens`` are stored for ``user_id``.
        thread_id / agent_id: recorded with stored outputs.
        excerpt_tokens: size of the excerpt posted with a placeholder.
        approval_func: optional check before running code (AgentChat's approval protocol).

    Example:
        >>> executor = ExecutorAgent("executor", LocalProcessGroupExecutor(), store=store,  # doctest: +SKIP
        ...                          user_id="alice", thread_id="t1", offload_threshold_tokens=500)
    """

    def __init__(
        self,
        name: str,
        code_executor: CodeExecutor,
        *,
        store: MemoryStore,
        user_id: str,
        thread_id: str | None = None,
        agent_id: str | None = None,
        offload_threshold_tokens: int = 500,
        excerpt_tokens: int = 200,
        description: str | None = None,
        sources: Sequence[str] | None = None,
        supported_languages: list[str] | None = None,
        approval_func: ApprovalFuncType | None = None,
    ) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "no approval function": a documented choice here
            super().__init__(
                name,
                code_executor,
                description=description or EXECUTOR_DESCRIPTION,
                sources=sources,
                supported_languages=supported_languages or ["python", "py", "bash", "sh", "shell"],
                approval_func=approval_func,
            )
        self._store = store
        self._offloader = Offloader(
            self._get_store,
            user_id=user_id,
            agent_id=agent_id or name,
            thread_id=thread_id,
            threshold_tokens=offload_threshold_tokens,
            excerpt_max_tokens=excerpt_tokens,
            offloaded_by="ExecutorAgent",
        )

    async def _get_store(self) -> MemoryStore:
        return self._store

    @property
    def code_executor(self) -> CodeExecutor:
        return self._code_executor

    async def on_messages_stream(
        self, messages: Sequence[BaseChatMessage], cancellation_token: CancellationToken
    ) -> AsyncGenerator[BaseAgentEvent | BaseChatMessage | Response, None]:
        code_blocks = await self.extract_code_blocks_from_messages(messages)
        if not code_blocks:
            yield Response(chat_message=TextMessage(content=self.NO_CODE_BLOCKS_FOUND_MESSAGE, source=self.name))
            return
        approved, reason = await self._approve(code_blocks)
        if not approved:
            text = f"Code execution was not approved. Reason: {reason}"
            yield Response(chat_message=TextMessage(content=text, source=self.name))
            return
        started = time.monotonic()
        executor = self._code_executor
        run = asyncio.create_task(executor.execute_code_blocks(code_blocks, cancellation_token=cancellation_token))
        try:
            if isinstance(executor, LiveOutput):  # it reports output as it comes (here or from a worker): show it
                tail = OutputTail()
                executor.output_tail = tail
                try:
                    languages = [b.language for b in code_blocks]
                    async for progress in while_running(run, tail, source=self.name, languages=languages):
                        yield progress
                finally:
                    executor.output_tail = None
            result = await run
        except BaseException:
            run.cancel()  # the consumer went away (Stop, a closed stream): the run's processes are killed
            await asyncio.wait({run})  # ... before this returns, so nothing of the run outlives it
            raise
        if not isinstance(getattr(result, "duration_s", None), float):  # e.g. the Docker executor
            result = ExecutionResult(
                exit_code=result.exit_code,
                output=result.output,
                code_file=getattr(result, "code_file", None),
                duration_s=round(time.monotonic() - started, 3),
                timed_out=result.exit_code == TIMEOUT_EXIT_CODE,
                output_bytes=len(result.output.encode("utf-8", "backslashreplace")),
                languages=tuple(b.language for b in code_blocks),
            )
        stored_event, text = await self.report(code_blocks, result)
        if stored_event is not None:
            yield stored_event
        yield CodeExecutionEvent(retry_attempt=0, result=CodeResult(result.exit_code, text), source=self.name)
        yield Response(chat_message=TextMessage(content=text, source=self.name))

    async def _approve(self, code_blocks: list[CodeBlock]) -> tuple[bool, str]:
        if self._approval_func is None:
            return True, ""
        code = "\n\n".join(f"```{b.language}\n{b.code}\n```" for b in code_blocks)
        request = ApprovalRequest(code=code, context=await self._model_context.get_messages())
        if iscoroutinefunction(self._approval_func):
            response: ApprovalResponse = await self._approval_func(request)
        else:
            response = self._approval_func(request)  # type: ignore[assignment]
        return response.approved, response.reason

    async def report(self, code_blocks: list[CodeBlock], result: CodeResult) -> tuple[MemoryStoredEvent | None, str]:
        """The message the team sees for ``result`` (and the stored-memory event when it was offloaded)."""
        output = result.output
        status = status_line(result)
        if not output.strip():
            return None, f"{status}\nThe script produced no output."
        languages = list(getattr(result, "languages", ()) or [b.language for b in code_blocks])
        code = "\n\n".join(b.code for b in code_blocks)
        first_code_line = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
        if len(first_code_line) > 48:
            first_code_line = first_code_line[:47] + "…"
        metadata: dict[str, Any] = {
            "code": code[:20_000],
            "language": ",".join(languages),
            "exit_code": result.exit_code,
            "duration_s": getattr(result, "duration_s", None),
            "timed_out": getattr(result, "timed_out", False),
            "truncated": getattr(result, "truncated", False),
            "not_utf8": getattr(result, "not_utf8", False),
            "output_bytes": getattr(result, "output_bytes", len(output.encode("utf-8", "backslashreplace"))),
            "source": "executor",
        }
        part = await self._offloader.prepare(
            output,
            memory_type="command_output",
            metadata=metadata,
            kind=f"{languages[0] if languages else 'code'}: {first_code_line}",
        )
        if part is None:
            return None, f"{status}\nOutput:\n{output}"
        try:
            stored = await self._offloader.store(output, part)
        except Exception as exc:  # a failed store must not abort the team's run, nor post the raw output
            log.exception("could not store the output of %s (%d tokens)", self.name, part.tokens)
            return None, not_stored_text(status, part, f"{type(exc).__name__}: {exc}")
        if isinstance(stored, Refused):
            return None, not_stored_text(status, part, stored.reason)
        if stored.key is None:
            # The database is down: posted inline, exactly; the coder's MemoryContext offloads it like any big
            # message, once the database is reachable.
            return None, f"{status}\nOutput:\n{output}"
        key = stored.key
        ref = format_memory_ref(key, part.description, part.tokens)
        text = (
            f"{status}\nThe output ({part.tokens} tokens) was stored in memory: {ref}\n"
            f"Excerpt:\n{part.excerpt}\n"
            f'Read more with retrieve_memory(key="{key}", grep="<regex>") or lines="START-END", head=N, tail=N.'
        )
        event = MemoryStoredEvent(
            source=self.name, memory_key=key, description=part.description, memory_type=part.memory_type,
            token_count=part.tokens, placeholder=ref,
            metadata={k: v for k, v in part.metadata.items() if k != "code"},
        )  # fmt: skip
        return event, text

    def _to_config(self) -> Any:
        raise NotImplementedError(
            "ExecutorAgent holds a live MemoryStore and user; build it with AgentBuilder from a spec instead"
        )


def not_stored_text(status: str, part: OffloadedPart, reason: str) -> str:
    """What the team sees for a big output that could not be stored: status, why, and the excerpt."""
    if len(reason) > _ERROR_NOTE_CHARS:
        reason = reason[: _ERROR_NOTE_CHARS - 1] + "…"
    return (
        f"{status}\nThe output ({part.tokens} tokens) was too large to show and could not be stored "
        f"({reason}). Excerpt:\n{part.excerpt}"
    )
