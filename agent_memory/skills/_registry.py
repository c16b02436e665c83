"""SkillRegistry: the skills of any user and agent, validated here, stored and ranked by the store and search wings.

Every method takes the owner pair ``(user, agent)``; the store filters every statement by both, so another user's
(or agent's) skill behaves exactly like a missing one. Validation (names, code, schemas, strings) happens here,
before anything reaches the database.

Example:
    >>> registry = SkillRegistry(store)  # doctest: +SKIP
    >>> await registry.list("alice", agent_id="coder")  # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack

from ..search import Embedder
from ..store import MemoryStore, SkillStore
from ..validation import check_identifier, check_query, check_user_id
from ._code import LANGUAGES, check_name, check_schema_matches, find_entrypoint, schema_from_function
from ._models import (
    MAX_CODE_CHARS,
    MAX_DESCRIPTION_CHARS,
    STATUSES,
    RegisterResult,
    Skill,
    SkillError,
    SkillLimitReached,
    SkillNotFound,
    SkillStats,
    SkillStatus,
    SkillVersion,
    skill_from_row,
    version_from_row,
)
from ._params import MAX_LIST_ITEMS, check_parameters_schema, clean_strings


class PruneOptions(TypedDict, total=False):
    """What :meth:`SkillRegistry.prune` deletes (see there for the defaults)."""

    unused_days: float | None
    min_success_rate: float | None
    min_executions: int
    as_of: datetime | None
    dry_run: bool


class SkillRegistry:
    """The ``skills`` table for any user and agent; every method filters by both in SQL.

    Example:
        >>> registry = SkillRegistry(store)  # doctest: +SKIP
        >>> await registry.list("alice", agent_id="coder")  # doctest: +SKIP
    """

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.rows = SkillStore(store.db.pool)

    async def register(
        self,
        user_id: str,
        agent_id: str,
        *,
        name: str,
        description: str,
        code: str,
        language: str = "python",
        parameters: dict[str, Any] | None = None,
        example_prompts: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        entrypoint: str | None = None,
        source: str = "agent",
        status: SkillStatus = "active",
        max_skills: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> RegisterResult:
        """Create the skill, or make a new version when its code, parameters or description changed.

        A new version starts with zero runs (the old version's counts stay in its history) and takes ``status``
        (so with approval required a changed skill waits for approval again), except that a rejected or disabled
        skill stays so. Same content: ``unchanged``.
        """
        user_id = check_user_id(user_id)
        agent_id = str(check_identifier(agent_id, "agent_id"))
        name = check_name(name)
        if language not in LANGUAGES:
            raise SkillError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
        if not isinstance(code, str) or not code.strip():
            raise SkillError("the skill code is empty")
        if "\x00" in code or len(code) > MAX_CODE_CHARS:
            raise SkillError(f"the skill code must be text without NUL of at most {MAX_CODE_CHARS} characters")
        if not isinstance(description, str) or not description.strip():
            raise SkillError("a skill needs a description (what it does and when to use it)")
        description = description.strip()[:MAX_DESCRIPTION_CHARS]
        meta = dict(metadata or {})
        if language == "python":
            entry = find_entrypoint(code, name, entrypoint)
            if parameters is None:
                schema = schema_from_function(code, entry) if entry else check_parameters_schema(None)
            else:
                schema = check_parameters_schema(parameters)
                if entry:
                    check_schema_matches(code, entry, schema)
            meta["entrypoint"] = entry
        else:
            schema = check_parameters_schema(parameters)
            meta.pop("entrypoint", None)
        # Same description, code, language and schema: the same skill (re-registering it changes nothing).
        meta["fingerprint"] = hashlib.sha256(
            json.dumps([description, code, language, schema], sort_keys=True).encode()
        ).hexdigest()
        skill = {
            "name": name, "description": description, "code": code, "language": language, "parameters": schema,
            "example_prompts": clean_strings(example_prompts, "example prompts"), "tags": clean_strings(tags, "tags"),
            "status": status, "source": source, "metadata": meta,
        }  # fmt: skip
        written = await self.rows.write(user_id, agent_id, skill, max_skills=max_skills, max_list_items=MAX_LIST_ITEMS)
        if written.row is None:
            raise SkillLimitReached(
                f"this agent already has {written.count} skills for this user (max_skills_per_user = "
                f"{max_skills}); disable or delete one, or raise the limit"
            )
        assert written.action != "limit_reached"
        return RegisterResult(skill=skill_from_row(written.row), action=written.action)

    async def get(self, user_id: str, agent_id: str, name: str) -> Skill:
        row = await self.rows.get(check_user_id(user_id), agent_id, name)
        if row is None:
            raise SkillNotFound(str(name))
        return skill_from_row(row)

    async def versions(self, user_id: str, agent_id: str, name: str) -> list[SkillVersion]:
        """The skill's versions, oldest first (the current one last, with its live counts)."""
        current = await self.get(user_id, agent_id, name)
        out = [version_from_row(r) for r in await self.rows.versions(user_id, agent_id, name)]
        if out and out[-1].version == current.version:
            out[-1] = out[-1].model_copy(
                update={"execution_count": current.execution_count, "success_count": current.success_count}
            )
        return out

    async def list(
        self, user_id: str, agent_id: str | None = None, *, status: SkillStatus | None = None, limit: int = 500
    ) -> builtins.list[Skill]:
        """The user's skills (of one agent, or all agents), by agent then name."""
        rows = await self.rows.list(check_user_id(user_id), agent_id, status=status, limit=limit)
        return [skill_from_row(r) for r in rows]

    async def resolve_agent(self, user_id: str, name: str, agent_id: str | None) -> str:
        """The agent owning ``name`` for this user (for operators who did not say which agent)."""
        if agent_id is not None:
            return agent_id
        agents = sorted({s.agent_id for s in await self.list(user_id) if s.name == name})
        if not agents:
            raise SkillNotFound(name)
        if len(agents) > 1:
            raise SkillError(f"skill {name!r} exists for several agents ({', '.join(agents)}); pass the agent")
        return agents[0]

    async def search(
        self,
        user_id: str,
        agent_id: str,
        query: str,
        *,
        limit: int = 5,
        threshold: float = 0.3,
        statuses: Sequence[SkillStatus] = ("active",),
        embedder: Embedder | None = None,
    ) -> builtins.list[Skill]:
        """Skills of this user and agent relevant to ``query`` (relevance >= threshold), most useful first.

        With an ``embedder`` a dense ranker (cosine of the query and each skill's name, description and example
        prompts) joins the lexical ones: paraphrases ("tally the tokens of this passage") find "count words".
        """
        try:
            query = check_query(query)
        except ValueError as exc:
            raise SkillError(str(exc)) from None
        if not query:
            return []
        rows = await self.rows.search(check_user_id(user_id), agent_id, query, statuses=statuses, embedder=embedder)
        found: list[Skill] = []
        for row in rows:
            relevance = float(row["relevance"])
            if relevance < threshold:
                continue
            skill = skill_from_row(row, relevance=relevance)
            found.append(skill.model_copy(update={"score": relevance * (0.5 + 0.5 * skill.reliability)}))
        found.sort(key=lambda s: (-(s.score or 0.0), -(s.relevance or 0.0), s.name))
        return found[:limit]

    async def set_status(self, user_id: str, agent_id: str, name: str, status: SkillStatus) -> Skill:
        if status not in STATUSES:
            raise SkillError(f"status must be one of {', '.join(STATUSES)}")
        row = await self.rows.set_status(check_user_id(user_id), agent_id, name, status)
        if row is None:
            raise SkillNotFound(str(name))
        return skill_from_row(row)

    async def record_run(
        self, user_id: str, agent_id: str, name: str, version: int, *, success: bool, error: str | None
    ) -> None:
        """Count one run of ``version`` (a run of a version replaced meanwhile only lands in its history)."""
        await self.rows.record_run(user_id, agent_id, name, version, success=success, error=error)

    async def delete(self, user_id: str, agent_id: str, name: str) -> None:
        if not await self.rows.delete(check_user_id(user_id), agent_id, name):
            raise SkillNotFound(str(name))

    async def stats(self, user_id: str, agent_id: str | None = None) -> SkillStats:
        skills = await self.list(user_id, agent_id, limit=100_000)
        by_status: dict[str, int] = {}
        for s in skills:
            by_status[s.status] = by_status.get(s.status, 0) + 1
        runs = sum(s.execution_count for s in skills)
        ok = sum(s.success_count for s in skills)
        top = sorted(skills, key=lambda s: (-s.execution_count, s.name))[:5]
        return SkillStats(
            total=len(skills), by_status=by_status, executions=runs, successes=ok,
            success_rate=round(ok / runs, 4) if runs else None,
            most_used=[{"name": s.name, "agent_id": s.agent_id, "runs": s.execution_count,
                        "success_rate": s.success_rate} for s in top if s.execution_count],
        )  # fmt: skip

    async def prune(
        self, user_id: str, agent_id: str | None = None, **options: Unpack[PruneOptions]
    ) -> builtins.list[Skill]:
        """Delete skills not used for ``unused_days`` (default 90; None: no age limit; never-used ones count from
        creation) and, when ``min_success_rate`` is set, skills whose success rate over at least
        ``min_executions`` (default 3) runs is lower.

        ``as_of`` is "now" (tests and what-if runs pass a later time); ``dry_run`` deletes nothing. Returns what
        was (or would be) deleted.
        """
        unused_days = options.get("unused_days", 90)
        now = options.get("as_of") or datetime.now(UTC)
        rows = await self.rows.prune(
            check_user_id(user_id), agent_id,
            unused_before=now - timedelta(days=unused_days) if unused_days is not None else None,
            min_success_rate=options.get("min_success_rate"), min_executions=options.get("min_executions", 3),
            dry_run=options.get("dry_run", False),
        )  # fmt: skip
        return [skill_from_row(r) for r in rows]
