"""ProceduralMemory: skills and lessons of one user with one agent; skills run in an executor handed in.

* register / read / search / status / prune: :class:`~agent_memory.skills.SkillRegistry` bound to the pair.
* ``use_skill``: parameters validated against the skill's schema, then the skill runs in the executor the caller
  handed in (``executor=`` or :meth:`ProceduralMemory.use_executor`; the agents wing hands in its sandboxed
  ``LocalProcessGroupExecutor`` or the team's own executor). Without one, nothing runs: a skill is model-written
  code and never runs unsandboxed by default. An output over ``max_output_chars`` goes through the context
  wing's one :class:`~agent_memory.context.Offloader` (same description, excerpt and database-down rule as
  MemoryContext and the executor).
* capture (``propose_skill_from_success``), lessons (:class:`~agent_memory.skills._lessons.LessonMemory`) and
  SKILL.md export/import.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.agents import LocalProcessGroupExecutor
    >>> async def main() -> str:
    ...     async with await MemoryStore.open() as store:
    ...         skills = ProceduralMemory(store, user_id="alice", agent_id="coder",
    ...                                   executor=LocalProcessGroupExecutor(timeout=60, work_dir="/tmp/skills"))
    ...         await skills.register_skill("add_numbers", "Add two integers",
    ...                                     "def add_numbers(a: int, b: int) -> int:\\n    return a + b\\n")
    ...         found = await skills.search_skills("add two numbers")
    ...         run = await skills.use_skill(found[0].name, {"a": 2, "b": 3})
    ...         return run.output.strip()
    >>> asyncio.run(main())  # doctest: +SKIP
    '5'
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Unpack

from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock, CodeExecutor, CodeResult
from autogen_core.models import ChatCompletionClient

from ..context import DB_UNAVAILABLE_ERRORS, Offloader, Refused
from ..search import Embedder
from ..store import MemoryStore
from ..validation import check_identifier, check_user_id
from ._capture import DraftOptions, propose_from_success
from ._code import SkillCodeError, bash_program, python_program
from ._lessons import LessonMemory, error_summary
from ._models import (
    ProceduralMemorySettings,
    RegisterResult,
    Skill,
    SkillDraft,
    SkillError,
    SkillNotActive,
    SkillRun,
    SkillStats,
    SkillStatus,
    SkillVersion,
)
from ._params import validate_params
from ._registry import PruneOptions, SkillRegistry
from ._skill_md import find_skill_folders, read_skill_folder, write_skill_folder

log = logging.getLogger(__name__)

NO_EXECUTOR = (
    "no executor to run skills in: hand one in with ProceduralMemory(..., executor=...) or use_executor(...) "
    "(e.g. the agents' agent_memory.agents.LocalProcessGroupExecutor(timeout=..., work_dir=...)); the skills "
    "wing builds no executor of its own, so skills run only where the caller decided"
)


class ProceduralMemory(LessonMemory):
    """Skills and lessons of one user with one agent.

    Args:
        store: the memory store (its database holds the skills; lessons are ``lesson`` memories).
        user_id / agent_id: the owner pair; nothing outside it is ever found, run or changed.
        settings: :class:`ProceduralMemorySettings` (approval, limits, threshold, timeout).
        executor: where skills run (an AutoGen ``CodeExecutor``, e.g. the agents' sandboxed
            ``LocalProcessGroupExecutor``); without one ``use_skill`` refuses to run (:class:`SkillError`).
        model_client: optional; lets ``propose_skill_from_success`` generalise parameters with an LLM.
        embedder: optional dense ranker for ``search_skills`` (default: the store's embedder, if configured).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        user_id: str,
        agent_id: str,
        settings: ProceduralMemorySettings | None = None,
        executor: CodeExecutor | None = None,
        model_client: ChatCompletionClient | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.user_id = check_user_id(user_id)
        self.agent_id = str(check_identifier(agent_id, "agent_id"))
        self.settings = settings or ProceduralMemorySettings()
        self.registry = SkillRegistry(store)
        self.model_client = model_client
        self._executor = executor
        # Dense skill search: the given embedder, else the store's (AGENT_MEMORY_EMBEDDER); none: lexical only.
        if embedder is None and store.embeddings is not None and store.embeddings.embedder.enabled:
            embedder = store.embeddings.embedder
        self.embedder = embedder

    def use_executor(self, executor: CodeExecutor) -> None:
        """Run skills with ``executor`` from now on (the team's sandbox: same work dir, limits, environment)."""
        self._executor = executor

    @property
    def executor(self) -> CodeExecutor:
        """The executor skills run in; :class:`SkillError` when none was handed in."""
        if self._executor is None:
            raise SkillError(NO_EXECUTOR)
        return self._executor

    # ------------------------------------------------------------------ register / read

    async def register_skill(
        self,
        name: str,
        description: str,
        code: str,
        *,
        parameters: dict[str, Any] | None = None,
        language: str = "python",
        example_prompts: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        entrypoint: str | None = None,
        source: str = "agent",
        metadata: dict[str, Any] | None = None,
        status: SkillStatus | None = None,
    ) -> RegisterResult:
        """Save code as a skill (re-registering changed code makes a new version).

        ``parameters`` is a JSON Schema; omitted, it is derived from the entrypoint's signature. With
        ``require_skill_approval`` the skill (or its new version) waits in ``pending_approval``; ``status``
        overrides that (captured proposals are registered pending).
        """
        if status is None:
            status = "pending_approval" if self.settings.require_skill_approval else "active"
        try:
            return await self.registry.register(
                self.user_id, self.agent_id, name=name, description=description, code=code, language=language,
                parameters=parameters, example_prompts=example_prompts, tags=tags, entrypoint=entrypoint,
                source=source, status=status, max_skills=self.settings.max_skills_per_user, metadata=metadata,
            )  # fmt: skip
        except SkillCodeError as exc:
            raise SkillError(str(exc)) from None

    async def get_skill(self, name: str) -> Skill:
        return await self.registry.get(self.user_id, self.agent_id, name)

    async def list_skills(self, *, status: SkillStatus | None = None) -> list[Skill]:
        return await self.registry.list(self.user_id, self.agent_id, status=status)

    async def versions(self, name: str) -> list[SkillVersion]:
        return await self.registry.versions(self.user_id, self.agent_id, name)

    async def search_skills(self, query: str, *, limit: int = 5, threshold: float | None = None) -> list[Skill]:
        """Active skills relevant to ``query``, most useful first (relevance weighted by success rate)."""
        return await self.registry.search(
            self.user_id, self.agent_id, query, limit=limit,
            threshold=self.settings.skill_search_threshold if threshold is None else threshold, embedder=self.embedder,
        )  # fmt: skip

    async def approve(self, name: str) -> Skill:
        return await self.registry.set_status(self.user_id, self.agent_id, name, "active")

    async def reject(self, name: str) -> Skill:
        return await self.registry.set_status(self.user_id, self.agent_id, name, "rejected")

    async def disable(self, name: str) -> Skill:
        return await self.registry.set_status(self.user_id, self.agent_id, name, "disabled")

    async def delete(self, name: str) -> None:
        await self.registry.delete(self.user_id, self.agent_id, name)

    async def stats(self) -> SkillStats:
        return await self.registry.stats(self.user_id, self.agent_id)

    async def prune(self, **options: Unpack[PruneOptions]) -> list[Skill]:
        """Delete this agent's skills unused for ``unused_days`` and (optionally) unreliable ones.

        Options and defaults as :meth:`SkillRegistry.prune`.
        """
        return await self.registry.prune(self.user_id, self.agent_id, **options)

    # ------------------------------------------------------------------ run

    async def use_skill(
        self, name: str, params: dict[str, Any] | None = None, *, cancellation_token: CancellationToken | None = None
    ) -> SkillRun:
        """Run the active skill ``name`` with ``params`` (validated against its schema first) and record the outcome.

        Raises :class:`SkillNotFound`, :class:`SkillNotActive` (pending, rejected, disabled) or :class:`SkillError`
        (invalid parameters, or no executor handed in: nothing runs and nothing is counted).
        """
        skill = await self.get_skill(name)
        if skill.status != "active":
            hint = {"pending_approval": "it is waiting for approval", "rejected": "it was rejected",
                    "disabled": "it is disabled"}[skill.status]  # fmt: skip
            raise SkillNotActive(f"skill {name!r} cannot be used: {hint}")
        values = validate_params(skill.parameters, params)
        executor = self.executor
        if skill.language == "python":
            block = CodeBlock(code=python_program(skill.code, skill.name, values, skill.entrypoint), language="python")
        else:
            block = CodeBlock(code=bash_program(skill.code, values), language="bash")
        result = await executor.execute_code_blocks([block], cancellation_token or CancellationToken())
        timed_out = bool(getattr(result, "timed_out", False))
        success = result.exit_code == 0 and not timed_out
        output, truncated, memory_key = await self._shown_output(skill, values, result)
        error = None if success else error_summary(result.output)
        try:
            await self.registry.record_run(self.user_id, self.agent_id, skill.name, skill.version, success=success,
                                           error=error)  # fmt: skip
        except DB_UNAVAILABLE_ERRORS as exc:  # the run happened: its output matters more than its count
            log.warning("run of skill %r not counted, the database is unreachable: %s", skill.name, exc)
        return SkillRun(
            name=skill.name, version=skill.version, success=success, exit_code=result.exit_code, output=output,
            truncated=truncated, timed_out=timed_out, duration_s=getattr(result, "duration_s", None),
            memory_key=memory_key,
        )  # fmt: skip

    async def _shown_output(
        self, skill: Skill, values: dict[str, Any], result: CodeResult
    ) -> tuple[str, bool, str | None]:
        """(output shown, truncated, memory key): an output over ``max_output_chars`` is stored, an excerpt shown.

        Database down: the output is shown in full (not lost; the caller's MemoryContext offloads it once the
        database is back). Refused by the store (over its size limit): the excerpt, with no key.
        """
        output = result.output
        if len(output) <= self.settings.max_output_chars:
            return output, False, None
        offloaded = await self._offloader().offload(
            output, memory_type="command_output", kind=f"skill {skill.name} v{skill.version}",
            metadata={"skill": skill.name, "skill_version": skill.version, "params": values,
                      "exit_code": result.exit_code, "source": "skills"},
        )  # fmt: skip
        if isinstance(offloaded, Refused):
            log.warning("output of skill %r not stored, excerpt shown: %s", skill.name, offloaded.reason)
            return offloaded.part.excerpt, True, None
        if offloaded is None or offloaded.key is None:
            return output, False, None
        return offloaded.excerpt, True, offloaded.key

    def _offloader(self) -> Offloader:
        return Offloader(
            self._get_store, user_id=self.user_id, agent_id=self.agent_id, thread_id=None,
            threshold_tokens=0,  # every output handed in: max_output_chars (characters) decides what is big
            excerpt_max_tokens=max(50, self.settings.max_output_chars // 8), offloaded_by="ProceduralMemory",
        )  # fmt: skip

    async def _get_store(self) -> MemoryStore:
        return self.store

    # ------------------------------------------------------------------ capture

    async def propose_skill_from_success(self, task: str, code: str, **options: Unpack[DraftOptions]) -> SkillDraft:
        """A skill draft from code that just worked for ``task`` (deterministic; an LLM generalises if configured).

        ``options``: ``language``, ``name``, ``description``, ``output`` (see
        :func:`~agent_memory.skills._capture.propose_from_success`). Register it with :meth:`register_draft`.
        """
        return await propose_from_success(task, code, model_client=self.model_client, **options)

    async def register_draft(self, draft: SkillDraft, *, status: SkillStatus | None = None) -> RegisterResult:
        return await self.register_skill(
            draft.name, draft.description, draft.code, parameters=draft.parameters, language=draft.language,
            example_prompts=draft.example_prompts, tags=draft.tags, entrypoint=draft.entrypoint, source=draft.source,
            status=status,
        )  # fmt: skip

    # ------------------------------------------------------------------ SKILL.md

    async def export_skills(self, directory: Path | str, names: Sequence[str] | None = None) -> list[Path]:
        """Write each skill (or only ``names``) as an Agent Skills folder: ``<dir>/<name>/SKILL.md`` + script."""
        skills = [await self.get_skill(n) for n in names] if names else await self.list_skills()
        return [await asyncio.to_thread(write_skill_folder, Path(directory), s) for s in skills]

    async def import_skills(self, path: Path | str) -> list[RegisterResult]:
        """Register every SKILL.md folder under ``path`` (a skill folder or a folder of them) for this agent."""
        results = []
        for folder in await asyncio.to_thread(find_skill_folders, Path(path)):
            draft = await asyncio.to_thread(read_skill_folder, folder)
            results.append(await self.register_draft(draft.model_copy(update={"source": "import"})))
        return results
