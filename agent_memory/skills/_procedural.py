"""Procedural memory: skills learned from code that worked, searched and reused deterministically (seed 000).

A **skill** is named, parameterised code (Python or bash) with a JSON-Schema for its parameters, owned by one
``(user, agent)`` pair. Nothing here ever reads past that pair: every statement filters by the user's identifier
and the agent id in SQL, so another user's (or another agent's) skill behaves exactly like a missing one.

* :class:`SkillRegistry` — the table ``skills`` (+ ``skill_versions``): register (a changed re-registration is a
  new version), get, list, lexical search (full-text + trigram + name match, fused like :mod:`agent_memory.search`),
  status changes, run outcomes, stats, pruning.
* :class:`ProceduralMemory` — the registry bound to one user and agent, plus :class:`ProceduralMemorySettings`
  (approval, limits, threshold), running a skill in the executor's sandbox (``use_skill``: parameters validated
  against the schema first; outcome recorded), capture (``propose_skill_from_success``, ``record_failure_lesson``
  / ``recall_lessons``) and SKILL.md export/import (:mod:`agent_memory.skills`).

Ranking prefers reliable skills: ``score = relevance * (0.5 + 0.5 * reliability)`` where reliability is the
Laplace-smoothed success rate ``(successes + 1) / (runs + 2)``; the threshold applies to relevance, so a broken
skill is still findable by name but drops below a working one for the same task.

Example:
    >>> import asyncio
    >>> from agent_memory import MemoryStore
    >>> from agent_memory.skills._procedural import ProceduralMemory
    >>> async def main() -> str:
    ...     async with await MemoryStore.open() as store:
    ...         skills = ProceduralMemory(store, user_id="alice", agent_id="coder")
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
import builtins
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import asyncpg
import jsonschema
from autogen_core import CancellationToken
from autogen_core.code_executor import CodeBlock, CodeExecutor
from autogen_core.models import ChatCompletionClient
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..errors import AgentMemoryError, MemoryNotFound
from ..search import Embedder, EmbeddingError
from ..store import MemoryStore
from ..validation import MAX_QUERY_CHARS, check_identifier, check_user_id
from ._code import (
    LANGUAGES,
    SkillCodeError,
    bash_program,
    check_name,
    check_schema_matches,
    find_entrypoint,
    python_program,
    schema_from_function,
)

log = logging.getLogger(__name__)

SkillStatus = Literal["active", "pending_approval", "rejected", "disabled"]
STATUSES: tuple[SkillStatus, ...] = ("active", "pending_approval", "rejected", "disabled")
MAX_CODE_CHARS = 200_000
MAX_DESCRIPTION_CHARS = 2000
LESSON_TAG = "failure-derived"
SUCCESS_TAG = "success-derived"
_RRF_K = 60
_CANDIDATES = 50
_TRIGRAM_THRESHOLD = 0.45
_TRIGRAM_MAX_WORDS = 4


class SkillNotFound(MemoryNotFound):
    """No skill of this name for this user and agent (also raised for another user's or agent's skill)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.args = (f"skill {name!r} not found",)


class SkillError(AgentMemoryError, ValueError):
    """A skill operation was refused (invalid parameters, not active, limit reached...). The message says why."""


class SkillNotActive(SkillError):
    """The skill exists but may not run: pending approval, rejected or disabled."""


class SkillLimitReached(SkillError):
    """``max_skills_per_user`` skills already exist for this user and agent."""


class ProceduralMemorySettings(BaseSettings):
    """Procedural-memory switches (seed 000 section 5.2); env ``AGENT_MEMORY_SKILLS_<FIELD>``.

    ``enabled=False`` (the default) means no skill tools and no prompt addition: agents behave exactly as before.

    Example:
        >>> ProceduralMemorySettings(enabled=True, require_skill_approval=True).require_skill_approval
        True
    """

    model_config = SettingsConfigDict(env_prefix="AGENT_MEMORY_SKILLS_", extra="ignore")

    enabled: bool = Field(default=False, description="Skill tools and prompt for agents (off: unchanged agents).")
    auto_register_skills: bool = Field(default=True, description="Agents may register skills (register_skill tool).")
    require_skill_approval: bool = Field(default=False, description="New skills wait for approval before use.")
    max_skills_per_user: int = Field(default=0, ge=0, description="Skills per user and agent; 0 = unlimited.")
    skill_search_threshold: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Minimum relevance (0..1) of a search hit."
    )
    prefer_skills: bool = Field(default=True, description="The prompt tells the agent to search skills first.")
    execution_timeout: int = Field(default=60, ge=1, description="Seconds a skill run may take (tree killed after).")
    max_output_chars: int = Field(default=8000, ge=200, description="Output of a run shown to the model.")
    learn_from_runs: bool = Field(
        default=False,
        description="After each team run: lessons from failures that were then fixed, and the code that worked "
        "proposed as a skill (pending approval) when the agent registered none.",
    )


class Skill(BaseModel):
    """One skill (current version). ``relevance``/``score`` are set by search."""

    model_config = ConfigDict(frozen=True)

    name: str
    agent_id: str
    description: str
    code: str
    language: str = "python"
    parameters: dict[str, Any] = Field(default_factory=dict)
    example_prompts: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    status: SkillStatus = "active"
    source: str = "agent"
    version: int = 1
    execution_count: int = 0
    success_count: int = 0
    last_error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None = None
    relevance: float | None = None
    score: float | None = None

    @property
    def success_rate(self) -> float | None:
        """Successful runs / runs of this version; None before the first run."""
        return self.success_count / self.execution_count if self.execution_count else None

    @property
    def reliability(self) -> float:
        """Laplace-smoothed success rate: 0.5 untried, towards 1 (or 0) as runs succeed (or fail)."""
        return (self.success_count + 1) / (self.execution_count + 2)

    @property
    def entrypoint(self) -> str | None:
        value = self.metadata.get("entrypoint")
        return value if isinstance(value, str) else None

    def summary(self) -> dict[str, Any]:
        """What a model needs to decide and call: name, description, parameters, track record."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "version": self.version,
            "runs": self.execution_count,
            "success_rate": None if self.success_rate is None else round(self.success_rate, 3),
        }
        if self.relevance is not None:
            out["relevance"] = round(self.relevance, 3)
        return out


class SkillVersion(BaseModel):
    """One version in a skill's history."""

    version: int
    description: str
    code: str
    language: str
    parameters: dict[str, Any]
    example_prompts: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    execution_count: int = 0
    success_count: int = 0
    source: str = "agent"
    created_at: datetime


class RegisterResult(BaseModel):
    """What ``register_skill`` did: ``created`` (new skill), ``new_version`` (changed), or ``unchanged``."""

    skill: Skill
    action: Literal["created", "new_version", "unchanged"]


class SkillRun(BaseModel):
    """Outcome of one ``use_skill`` call."""

    name: str
    version: int
    success: bool
    exit_code: int
    output: str = Field(description="stdout+stderr (capped at max_output_chars; full text in memory_key if stored)")
    truncated: bool = False
    timed_out: bool = False
    duration_s: float | None = None
    memory_key: str | None = None

    def render(self) -> str:
        status = "succeeded" if self.success else ("timed out" if self.timed_out else f"failed (exit {self.exit_code})")
        head = f"Skill {self.name} v{self.version} {status}."
        more = f" Full output stored as {self.memory_key}." if self.memory_key else ""
        return f"{head}{more}\nOutput:\n{self.output}" if self.output.strip() else f"{head} No output."


class SkillStats(BaseModel):
    """Counts of one user's skills (optionally one agent's)."""

    total: int
    by_status: dict[str, int]
    executions: int
    successes: int
    success_rate: float | None
    most_used: list[dict[str, Any]]


class Lesson(BaseModel):
    """A failure-derived lesson: when a task like ``when`` fails with ``error``, do ``do``."""

    key: str
    when: str
    error: str
    do: str
    score: float | None = None
    created_at: datetime

    def render(self) -> str:
        return f"- When {self.when}: {self.do}" + (f" (it failed with: {self.error})" if self.error else "")


# --------------------------------------------------------------------------------------------- SQL

_SKILL_COLUMNS = (
    "s.id, s.agent_id, s.name, s.description, s.code, s.language, s.parameters, s.example_prompts, s.tags, "
    "s.status, s.source, s.version, s.execution_count, s.success_count, s.last_error, s.metadata, s.created_at, "
    "s.updated_at, s.last_used_at"
)
_OWNED = """s.user_id = (SELECT id FROM "User" WHERE identifier = $1) AND s.agent_id = $2"""

_MINE = "s.user_id = usr.id AND s.agent_id = $2 AND s.status = ANY($4::text[])"
# $1 user identifier, $2 agent, $3 query, $4 statuses, $5 candidates per ranker, $6 all rows, $7 embedder space
_SEARCH_SQL = f"""
WITH usr AS (SELECT id FROM "User" WHERE identifier = $1),
q AS (
    SELECT lex,
           CASE WHEN cardinality(lex) = 0 THEN NULL ELSE to_tsquery('simple', array_to_string(ARRAY(
               SELECT quote_literal(x) FROM unnest(lex) x), ' | ')) END AS tsq_or,
           websearch_to_tsquery('english', $3) AS tsq_web
    FROM (SELECT tsvector_to_array(to_tsvector('english', $3)) AS lex) l
),
fts_hits AS (
    SELECT s.id, s.search_vector AS sv, (s.search_vector @@ q.tsq_web) AS all_terms,
           ts_rank(s.search_vector, q.tsq_or) AS rank
    FROM skills s, usr, q
    WHERE {_MINE} AND q.tsq_or IS NOT NULL AND s.search_vector @@ q.tsq_or
    ORDER BY all_terms DESC, rank DESC LIMIT $5
),
fts_cov AS (  -- share of the query's words each kept row has (computed for the kept rows only)
    SELECT h.id, h.all_terms, h.rank,
           (SELECT count(*) FROM unnest(q.lex) x WHERE h.sv @@ to_tsquery('simple', quote_literal(x)))::float8
             / cardinality(q.lex) AS coverage
    FROM fts_hits h, q
),
fts AS (
    SELECT id, row_number() OVER (ORDER BY all_terms DESC, coverage DESC, rank DESC) AS rnk,
           CASE WHEN all_terms THEN 1.0 ELSE coverage END ^ 1.5 * 0.95 AS evidence
    FROM fts_cov
),
-- The skill's own name words all present in the task ("count words" in "please count the words of x.txt")
-- is strong evidence even when the task has many other words.
name_hits AS (
    SELECT s.id, cardinality(s.name_lexemes) AS total,
           (SELECT count(*) FROM unnest(s.name_lexemes) w WHERE w = ANY(q.lex))::float8
             / greatest(cardinality(s.name_lexemes), 1) AS coverage
    FROM skills s, usr, q
    WHERE {_MINE} AND s.name_lexemes && q.lex
),
nam AS (
    SELECT id, row_number() OVER (ORDER BY coverage DESC, total DESC) AS rnk,
           coverage ^ 2 * CASE WHEN total >= 2 THEN 0.9 ELSE 0.5 END AS evidence
    FROM name_hits
    ORDER BY coverage DESC LIMIT $5
),
trg AS (
    SELECT id, row_number() OVER (ORDER BY sim DESC) AS rnk, sim AS evidence FROM (
        SELECT s.id, word_similarity($3, s.search_head)::float8 AS sim
        FROM skills s, usr WHERE {_MINE} AND $3 <% s.search_head
          -- typo rescue is for short queries; long ones cost the most (a one-time filter skips the scan)
          AND (SELECT cardinality(lex) FROM q) <= {_TRIGRAM_MAX_WORDS}
        ORDER BY sim DESC LIMIT $5
    ) t
),
hits AS (
    SELECT id, rnk, evidence FROM fts UNION ALL SELECT id, rnk, evidence FROM nam
    UNION ALL SELECT id, rnk, evidence FROM trg
),
fused AS (
    SELECT id, 1.0 - exp(sum(ln(1.0 - least(0.999, evidence * {_RRF_K + 1}.0 / ({_RRF_K} + rnk))))) AS relevance
    FROM hits GROUP BY id
)
SELECT {_SKILL_COLUMNS}, coalesce(f.relevance, 0.0)::float8 AS relevance, e.embedding, e.fingerprint AS emb_fp
FROM skills s JOIN usr ON {_MINE} LEFT JOIN fused f ON f.id = s.id
LEFT JOIN skill_embeddings e ON e.skill_id = s.id AND e.model = $7
WHERE f.id IS NOT NULL OR $6::boolean  -- $6: every skill of the pair (dense ranking needs them all)
"""


def _embedding_text(row: dict[str, Any]) -> str:
    examples = "\n".join(row["example_prompts"] or [])
    return f"{row['name'].replace('_', ' ').replace('-', ' ')}: {row['description']}\n{examples}".strip()


def _embedding_fingerprint(row: dict[str, Any]) -> str:
    return hashlib.sha256(_embedding_text(row).encode("utf-8")).hexdigest()


def _skill_from_row(row: asyncpg.Record | dict[str, Any], **extra: Any) -> Skill:
    return Skill(
        name=row["name"], agent_id=row["agent_id"], description=row["description"], code=row["code"],
        language=row["language"], parameters=row["parameters"] or {}, example_prompts=list(row["example_prompts"]),
        tags=list(row["tags"]), status=row["status"], source=row["source"], version=row["version"],
        execution_count=row["execution_count"], success_count=row["success_count"], last_error=row["last_error"],
        metadata=row["metadata"] or {}, created_at=row["created_at"], updated_at=row["updated_at"],
        last_used_at=row["last_used_at"], **extra,
    )  # fmt: skip


def _clean_strings(values: Sequence[str] | None, what: str, limit: int = 20) -> list[str]:
    out: list[str] = []
    for value in values or []:
        if not isinstance(value, str):
            raise SkillError(f"{what} must be strings, got {type(value).__name__}")
        value = value.strip()
        if "\x00" in value:
            raise SkillError(f"{what} contain a NUL character")
        if value and value not in out:
            out.append(value[:500])
    return out[:limit]


def check_parameters_schema(schema: object) -> dict[str, Any]:
    """A JSON Schema of type object (checked with jsonschema's metaschema)."""
    if schema is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    if not isinstance(schema, dict):
        raise SkillError("parameters must be a JSON Schema object such as {'type': 'object', 'properties': {...}}")
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        raise SkillError("the parameters schema must have type 'object' (parameters are passed by name)")
    schema.setdefault("properties", {})
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SkillError(f"the parameters schema is not a valid JSON Schema: {exc.message}") from None
    return schema


def validate_params(schema: dict[str, Any], params: object) -> dict[str, Any]:
    """``params`` with schema defaults filled in; :class:`SkillError` listing every problem when invalid."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise SkillError(f"parameters must be an object (a dict of name -> value), got {type(params).__name__}")
    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(params), key=lambda e: list(e.path))
    if problems:
        detail = "; ".join(
            (f"{'.'.join(str(p) for p in e.path)}: " if e.path else "") + e.message for e in problems[:10]
        )
        raise SkillError(f"invalid parameters: {detail}. Expected schema: {json.dumps(schema)}")
    filled = dict(params)
    for key, prop in (schema.get("properties") or {}).items():
        if key not in filled and isinstance(prop, dict) and "default" in prop:
            filled[key] = prop["default"]
    return filled


class SkillRegistry:
    """The ``skills`` table for any user and agent; every method filters by both in SQL.

    Example:
        >>> registry = SkillRegistry(store)  # doctest: +SKIP
        >>> await registry.list("alice", agent_id="coder")  # doctest: +SKIP
    """

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.pool: asyncpg.Pool = store.db.pool

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
        prompts = _clean_strings(example_prompts, "example prompts")
        tag_list = _clean_strings(tags, "tags")
        fingerprint = hashlib.sha256(
            json.dumps([description, code, language, schema], sort_keys=True).encode()
        ).hexdigest()
        meta["fingerprint"] = fingerprint
        async with self.pool.acquire() as conn, conn.transaction():
            uid = await conn.fetchval(
                """INSERT INTO "User" (identifier) VALUES ($1) ON CONFLICT (identifier) DO UPDATE
                   SET identifier = EXCLUDED.identifier RETURNING id""",
                user_id,
            )
            # Serialise registrations of one (user, agent): the limit check and the version bump must not race.
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1 || chr(31) || $2))", uid, agent_id)
            row = await conn.fetchrow(
                f"SELECT {_SKILL_COLUMNS} FROM skills s WHERE s.user_id = $1 AND s.agent_id = $2 AND s.name = $3",
                uid, agent_id, name,
            )  # fmt: skip
            if row is None:
                if max_skills:
                    count = await conn.fetchval(
                        "SELECT count(*) FROM skills WHERE user_id = $1 AND agent_id = $2", uid, agent_id
                    )
                    if count >= max_skills:
                        raise SkillLimitReached(
                            f"this agent already has {count} skills for this user (max_skills_per_user = "
                            f"{max_skills}); disable or delete one, or raise the limit"
                        )
                row = await conn.fetchrow(
                    f"""INSERT INTO skills AS s (user_id, agent_id, name, description, code, language, parameters,
                            example_prompts, tags, status, source, metadata)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
                        RETURNING {_SKILL_COLUMNS}""",
                    uid, agent_id, name, description, code, language, schema, prompts, tag_list, status, source, meta,
                )  # fmt: skip
                action: Literal["created", "new_version", "unchanged"] = "created"
            elif (row["metadata"] or {}).get("fingerprint") == fingerprint:
                merged_prompts = _clean_strings([*row["example_prompts"], *prompts], "example prompts")
                merged_tags = _clean_strings([*row["tags"], *tag_list], "tags")
                row = await conn.fetchrow(
                    f"""UPDATE skills s SET example_prompts = $2, tags = $3, updated_at = now() WHERE s.id = $1
                        RETURNING {_SKILL_COLUMNS}""",
                    row["id"], merged_prompts, merged_tags,
                )  # fmt: skip
                action = "unchanged"
            else:
                await conn.execute(
                    "UPDATE skill_versions SET execution_count = $3, success_count = $4 "
                    "WHERE skill_id = $1 AND version = $2",
                    row["id"], row["version"], row["execution_count"], row["success_count"],
                )  # fmt: skip
                row = await conn.fetchrow(
                    f"""UPDATE skills s SET description = $2, code = $3, language = $4, parameters = $5,
                            example_prompts = $6, tags = $7, status = $8, source = $9, metadata = $10,
                            version = s.version + 1, execution_count = 0, success_count = 0, last_error = NULL,
                            updated_at = now()
                        WHERE s.id = $1 RETURNING {_SKILL_COLUMNS}""",
                    row["id"], description, code, language, schema,
                    _clean_strings([*prompts, *row["example_prompts"]], "example prompts"),
                    _clean_strings([*tag_list, *row["tags"]], "tags"),
                    # An operator's "rejected" / "disabled" holds for new versions too: re-registering is no way
                    # around it (approve brings the skill back).
                    row["status"] if row["status"] in ("rejected", "disabled") else status, source, meta,
                )  # fmt: skip
                action = "new_version"
            assert row is not None
            if action != "unchanged":
                await conn.execute(
                    """INSERT INTO skill_versions (skill_id, version, description, code, language, parameters,
                           example_prompts, tags, source) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
                    row["id"], row["version"], row["description"], row["code"], row["language"], row["parameters"],
                    list(row["example_prompts"]), list(row["tags"]), row["source"],
                )  # fmt: skip
        return RegisterResult(skill=_skill_from_row(row), action=action)

    async def get(self, user_id: str, agent_id: str, name: str) -> Skill:
        row = await self.pool.fetchrow(
            f"SELECT {_SKILL_COLUMNS} FROM skills s WHERE {_OWNED} AND s.name = $3",
            check_user_id(user_id), agent_id, name,
        )  # fmt: skip
        if row is None:
            raise SkillNotFound(str(name))
        return _skill_from_row(row)

    async def versions(self, user_id: str, agent_id: str, name: str) -> list[SkillVersion]:
        """The skill's versions, oldest first (the current one last, with its live counts)."""
        current = await self.get(user_id, agent_id, name)
        rows = await self.pool.fetch(
            f"""SELECT v.* FROM skill_versions v JOIN skills s ON s.id = v.skill_id
                WHERE {_OWNED} AND s.name = $3 ORDER BY v.version""",
            user_id, agent_id, name,
        )  # fmt: skip
        out = [
            SkillVersion(
                version=r["version"],
                description=r["description"],
                code=r["code"],
                language=r["language"],
                parameters=r["parameters"],
                example_prompts=list(r["example_prompts"]),
                tags=list(r["tags"]),
                execution_count=r["execution_count"],
                success_count=r["success_count"],
                source=r["source"],
                created_at=r["created_at"],
            )
            for r in rows
        ]
        if out and out[-1].version == current.version:
            out[-1] = out[-1].model_copy(
                update={"execution_count": current.execution_count, "success_count": current.success_count}
            )
        return out

    async def list(
        self, user_id: str, agent_id: str | None = None, *, status: SkillStatus | None = None, limit: int = 500
    ) -> builtins.list[Skill]:
        """The user's skills (of one agent, or all agents), by agent then name."""
        rows = await self.pool.fetch(
            f"""SELECT {_SKILL_COLUMNS} FROM skills s
                WHERE s.user_id = (SELECT id FROM "User" WHERE identifier = $1)
                  AND ($2::text IS NULL OR s.agent_id = $2) AND ($3::text IS NULL OR s.status = $3)
                ORDER BY s.agent_id, s.name LIMIT $4""",
            check_user_id(user_id), agent_id, status, limit,
        )  # fmt: skip
        return [_skill_from_row(r) for r in rows]

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
        if not isinstance(query, str) or "\x00" in query:
            raise SkillError("query must be text without NUL characters")
        query = query.strip()[:MAX_QUERY_CHARS]
        if not query:
            return []
        query_vector: list[float] | None = None
        if embedder is not None and embedder.enabled:
            try:
                query_vector = await embedder.embed_query(query)
            except EmbeddingError as exc:  # the model is an improvement: rank lexically without it
                log.warning("skill search: query embedding failed, ranking lexically: %s", exc)
        space = embedder.model_id if embedder is not None and query_vector is not None else ""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(f"SET LOCAL pg_trgm.word_similarity_threshold = {_TRIGRAM_THRESHOLD}")
            rows = [
                dict(r)
                for r in await conn.fetch(
                    _SEARCH_SQL, check_user_id(user_id), agent_id, query, list(statuses), _CANDIDATES,
                    query_vector is not None, space,
                )
            ]  # fmt: skip
        if embedder is not None and query_vector is not None:
            await self._fuse_dense(rows, embedder, query_vector)
        found: list[Skill] = []
        for row in rows:
            relevance = float(row["relevance"])
            if relevance < threshold:
                continue
            skill = _skill_from_row(row, relevance=relevance)
            found.append(skill.model_copy(update={"score": relevance * (0.5 + 0.5 * skill.reliability)}))
        found.sort(key=lambda s: (-(s.score or 0.0), -(s.relevance or 0.0), s.name))
        return found[:limit]

    async def _fuse_dense(
        self, rows: builtins.list[dict[str, Any]], embedder: Embedder, query: builtins.list[float]
    ) -> None:
        """Add dense evidence to each row's lexical relevance (noisy-OR, rank-weighted like search.py)."""
        stale = [r for r in rows if r["embedding"] is None or r["emb_fp"] != _embedding_fingerprint(r)]
        if stale:
            try:
                vectors = await embedder.embed([_embedding_text(r) for r in stale])
            except EmbeddingError as exc:
                log.warning("skill search: embedding skills failed, ranking lexically: %s", exc)
                return
            for row, vector in zip(stale, vectors, strict=True):
                row["embedding"] = vector
            await self.pool.executemany(
                """INSERT INTO skill_embeddings (skill_id, model, fingerprint, embedding) VALUES ($1, $2, $3, $4)
                   ON CONFLICT (skill_id, model) DO UPDATE
                   SET fingerprint = EXCLUDED.fingerprint, embedding = EXCLUDED.embedding, created_at = now()""",
                [(r["id"], embedder.model_id, _embedding_fingerprint(r), r["embedding"]) for r in stale],
            )
        cosines = {id(r): sum(a * b for a, b in zip(query, r["embedding"], strict=False)) for r in rows}
        ranked = sorted(rows, key=lambda r: -cosines[id(r)])
        for rank, row in enumerate(ranked, start=1):
            evidence = embedder.calibrate(cosines[id(row)]) * (_RRF_K + 1) / (_RRF_K + rank)
            row["relevance"] = 1.0 - (1.0 - float(row["relevance"])) * (1.0 - min(0.999, evidence))

    async def set_status(self, user_id: str, agent_id: str, name: str, status: SkillStatus) -> Skill:
        if status not in STATUSES:
            raise SkillError(f"status must be one of {', '.join(STATUSES)}")
        row = await self.pool.fetchrow(
            f"""UPDATE skills s SET status = $4, updated_at = now() WHERE {_OWNED} AND s.name = $3
                RETURNING {_SKILL_COLUMNS}""",
            check_user_id(user_id), agent_id, name, status,
        )  # fmt: skip
        if row is None:
            raise SkillNotFound(str(name))
        return _skill_from_row(row)

    async def record_run(
        self, user_id: str, agent_id: str, name: str, version: int, *, success: bool, error: str | None
    ) -> None:
        """Count one run of ``version`` (a run of a version replaced meanwhile only lands in its history)."""
        updated = await self.pool.fetchval(
            f"""UPDATE skills s SET execution_count = s.execution_count + 1,
                       success_count = s.success_count + $5::boolean::int, last_used_at = now(),
                       last_error = CASE WHEN $5::boolean THEN s.last_error ELSE $6 END
                WHERE {_OWNED} AND s.name = $3 AND s.version = $4 RETURNING 1""",
            user_id, agent_id, name, version, success, error,
        )  # fmt: skip
        if updated is None:
            await self.pool.execute(
                f"""UPDATE skill_versions v SET execution_count = v.execution_count + 1,
                           success_count = v.success_count + $5::boolean::int
                    FROM skills s WHERE s.id = v.skill_id AND {_OWNED} AND s.name = $3 AND v.version = $4""",
                user_id, agent_id, name, version, success,
            )  # fmt: skip

    async def delete(self, user_id: str, agent_id: str, name: str) -> None:
        deleted = await self.pool.fetchval(
            f"DELETE FROM skills s WHERE {_OWNED} AND s.name = $3 RETURNING 1", check_user_id(user_id), agent_id, name
        )
        if deleted is None:
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
        self,
        user_id: str,
        agent_id: str | None = None,
        *,
        unused_days: float | None = 90,
        min_success_rate: float | None = None,
        min_executions: int = 3,
        as_of: datetime | None = None,
        dry_run: bool = False,
    ) -> builtins.list[Skill]:
        """Delete skills not used for ``unused_days`` (never-used ones count from creation) and, when
        ``min_success_rate`` is set, skills whose success rate over at least ``min_executions`` runs is lower.

        ``as_of`` is "now" (tests and what-if runs pass a later time). Returns what was (or would be) deleted.
        """
        now = as_of or datetime.now(UTC)
        cutoff = now - timedelta(days=unused_days) if unused_days is not None else None
        rows = await self.pool.fetch(
            f"""SELECT {_SKILL_COLUMNS} FROM skills s
                WHERE s.user_id = (SELECT id FROM "User" WHERE identifier = $1)
                  AND ($2::text IS NULL OR s.agent_id = $2)
                  AND (($3::timestamptz IS NOT NULL AND coalesce(s.last_used_at, s.created_at) < $3)
                       OR ($4::float8 IS NOT NULL AND s.execution_count >= $5
                           AND s.success_count::float8 / s.execution_count < $4))
                ORDER BY s.agent_id, s.name""",
            check_user_id(user_id), agent_id, cutoff, min_success_rate, min_executions,
        )  # fmt: skip
        doomed = [_skill_from_row(r) for r in rows]
        if doomed and not dry_run:
            await self.pool.execute("DELETE FROM skills WHERE id = ANY($1::uuid[])", [r["id"] for r in rows])
        return doomed


def default_work_dir(home: Path, user_id: str, agent_id: str) -> Path:
    """Per-user, per-agent sandbox directory for skill runs (names hashed: any identifier is a safe path)."""
    digest = hashlib.sha256(f"{user_id}\x1f{agent_id}".encode()).hexdigest()[:16]
    return home / "sandbox" / f"u-{hashlib.sha256(user_id.encode()).hexdigest()[:16]}" / f"skills-{digest}"


def make_executor(work_dir: Path, timeout: int) -> CodeExecutor:
    """The agents' executor (kills the whole process tree on timeout), else AutoGen's local executor."""
    try:
        from ..agents import LocalProcessGroupExecutor
    except ImportError:  # pragma: no cover - agents package absent
        import warnings

        from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return LocalCommandLineCodeExecutor(timeout=timeout, work_dir=work_dir)
    return LocalProcessGroupExecutor(timeout=timeout, work_dir=work_dir)


class ProceduralMemory:
    """Skills and lessons of one user with one agent.

    Args:
        store: the memory store (its database holds the skills; lessons are ``lesson`` memories).
        user_id / agent_id: the owner pair; nothing outside it is ever found, run or changed.
        settings: :class:`ProceduralMemorySettings` (approval, limits, threshold, timeout).
        executor: where skills run (an AutoGen ``CodeExecutor``); default: the agents' process-group executor in a
            per-user sandbox directory under ``AGENT_MEMORY_HOME/sandbox``.
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
        work_dir: Path | str | None = None,
        model_client: ChatCompletionClient | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.user_id = check_user_id(user_id)
        self.agent_id = str(check_identifier(agent_id, "agent_id"))
        self.settings = settings or ProceduralMemorySettings()
        self.registry = SkillRegistry(store)
        self.model_client = model_client
        self._work_dir = Path(work_dir) if work_dir is not None else None
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
        if self._executor is None:
            work_dir = self._work_dir or default_work_dir(
                self.store.settings.resolved_home(), self.user_id, self.agent_id
            )
            self._executor = make_executor(work_dir, self.settings.execution_timeout)
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

    async def prune(
        self,
        *,
        unused_days: float | None = 90,
        min_success_rate: float | None = None,
        min_executions: int = 3,
        as_of: datetime | None = None,
        dry_run: bool = False,
    ) -> builtins.list[Skill]:
        """Delete skills unused for ``unused_days`` and (optionally) unreliable ones. See SkillRegistry.prune."""
        return await self.registry.prune(
            self.user_id, self.agent_id, unused_days=unused_days, min_success_rate=min_success_rate,
            min_executions=min_executions, as_of=as_of, dry_run=dry_run,
        )  # fmt: skip

    # ------------------------------------------------------------------ run

    async def use_skill(
        self, name: str, params: dict[str, Any] | None = None, *, cancellation_token: CancellationToken | None = None
    ) -> SkillRun:
        """Run the active skill ``name`` with ``params`` (validated against its schema first) and record the outcome.

        Raises :class:`SkillNotFound`, :class:`SkillNotActive` (pending, rejected, disabled) or :class:`SkillError`
        (invalid parameters: nothing runs and nothing is counted).
        """
        skill = await self.get_skill(name)
        if skill.status != "active":
            hint = {"pending_approval": "it is waiting for approval", "rejected": "it was rejected",
                    "disabled": "it is disabled"}[skill.status]  # fmt: skip
            raise SkillNotActive(f"skill {name!r} cannot be used: {hint}")
        values = validate_params(skill.parameters, params)
        if skill.language == "python":
            block = CodeBlock(code=python_program(skill.code, skill.name, values, skill.entrypoint), language="python")
        else:
            block = CodeBlock(code=bash_program(skill.code, values), language="bash")
        result = await self.executor.execute_code_blocks([block], cancellation_token or CancellationToken())
        timed_out = bool(getattr(result, "timed_out", False))
        success = result.exit_code == 0 and not timed_out
        output = result.output
        memory_key: str | None = None
        truncated = False
        if len(output) > self.settings.max_output_chars:
            from ..context import excerpt

            memory_key = await self.store.store(
                output, user_id=self.user_id, agent_id=self.agent_id, memory_type="command_output",
                description=f"skill {skill.name} v{skill.version} output ({'ok' if success else 'failed'})",
                metadata={"skill": skill.name, "skill_version": skill.version, "params": values,
                          "exit_code": result.exit_code, "source": "skills"},
            )  # fmt: skip
            output = excerpt(output, max_tokens=max(50, self.settings.max_output_chars // 8))
            truncated = True
        error = None if success else _error_summary(result.output)
        await self.registry.record_run(self.user_id, self.agent_id, skill.name, skill.version, success=success,
                                       error=error)  # fmt: skip
        return SkillRun(
            name=skill.name, version=skill.version, success=success, exit_code=result.exit_code, output=output,
            truncated=truncated, timed_out=timed_out, duration_s=getattr(result, "duration_s", None),
            memory_key=memory_key,
        )  # fmt: skip

    # ------------------------------------------------------------------ capture

    async def propose_skill_from_success(
        self,
        task: str,
        code: str,
        *,
        language: str = "python",
        name: str | None = None,
        description: str | None = None,
        output: str | None = None,
    ) -> SkillDraft:
        """A skill draft from code that just worked for ``task`` (deterministic; an LLM generalises if configured).

        Register it with :meth:`register_draft`. See :mod:`agent_memory.skills`.
        """
        from ._capture import propose_from_success

        return await propose_from_success(
            task, code, language=language, name=name, description=description, output=output,
            model_client=self.model_client,
        )  # fmt: skip

    async def register_draft(self, draft: SkillDraft, *, status: SkillStatus | None = None) -> RegisterResult:
        return await self.register_skill(
            draft.name, draft.description, draft.code, parameters=draft.parameters, language=draft.language,
            example_prompts=draft.example_prompts, tags=draft.tags, entrypoint=draft.entrypoint, source=draft.source,
            status=status,
        )  # fmt: skip

    async def record_failure_lesson(
        self, task: str, error: str, fix: str, *, thread_id: str | None = None, tags: Sequence[str] = ()
    ) -> str:
        """Store "when ``task`` fails with ``error``, do ``fix``" as a ``lesson`` memory tagged failure-derived.

        Returns the lesson's memory key; the same lesson recorded again returns the existing key.
        """
        for value, what in ((task, "task"), (fix, "fix")):
            if not isinstance(value, str) or not value.strip():
                raise SkillError(f"a lesson needs a non-empty {what}")
        error_line = _error_summary(error or "") or ""
        content = f"When: {task.strip()}\nError: {error_line}\nDo: {fix.strip()}\n"
        sha = hashlib.sha256(content.encode("utf-8")).hexdigest()
        for item in await self.store.list(user_id=self.user_id, memory_type="lesson", agent_id=self.agent_id,
                                          limit=10_000):  # fmt: skip
            if item.content_sha256 == sha:
                return item.memory_key
        return await self.store.store(
            content, user_id=self.user_id, agent_id=self.agent_id, thread_id=thread_id, memory_type="lesson",
            description=f"Lesson: when {_clip(task, 120)} -> {_clip(fix, 120)}",
            metadata={"tags": [LESSON_TAG, *tags], "task": task.strip()[:2000], "error": error_line,
                      "fix": fix.strip()[:2000], "source": "skills"},
        )  # fmt: skip

    async def recall_lessons(self, task: str, *, limit: int = 3) -> list[Lesson]:
        """Failure-derived lessons of this agent and user relevant to ``task``, best first."""
        items = await self.store.search(task, user_id=self.user_id, limit=min(100, limit * 5), memory_type="lesson")
        out: list[Lesson] = []
        for item in items:
            meta = item.metadata
            if item.agent_id != self.agent_id or LESSON_TAG not in (meta.get("tags") or []):
                continue
            out.append(Lesson(key=item.memory_key, when=str(meta.get("task", "")), error=str(meta.get("error", "")),
                              do=str(meta.get("fix", "")), score=item.score, created_at=item.created_at))  # fmt: skip
        return out[:limit]

    async def prune_lessons(self, *, older_than_days: float = 180, as_of: datetime | None = None) -> list[str]:
        """Delete this agent's failure-derived lessons created and last recalled before the cutoff."""
        cutoff = (as_of or datetime.now(UTC)) - timedelta(days=older_than_days)
        items = await self.store.list(user_id=self.user_id, memory_type="lesson", agent_id=self.agent_id,
                                      limit=10_000)  # fmt: skip
        doomed = [
            i.memory_key for i in items
            if LESSON_TAG in (i.metadata.get("tags") or []) and i.created_at < cutoff
            and (i.last_accessed_at is None or i.last_accessed_at < cutoff)
        ]  # fmt: skip
        for key in doomed:
            try:
                await self.store.delete(key, user_id=self.user_id)
            except MemoryNotFound:
                pass
        return doomed

    # ------------------------------------------------------------------ SKILL.md

    async def export_skills(self, directory: Path | str, names: Sequence[str] | None = None) -> list[Path]:
        """Write each skill (or only ``names``) as an Agent Skills folder: ``<dir>/<name>/SKILL.md`` + script."""
        from ._skill_md import write_skill_folder

        skills = [await self.get_skill(n) for n in names] if names else await self.list_skills()
        return [await asyncio.to_thread(write_skill_folder, Path(directory), s) for s in skills]

    async def import_skills(self, path: Path | str) -> list[RegisterResult]:
        """Register every SKILL.md folder under ``path`` (a skill folder or a folder of them) for this agent."""
        from ._skill_md import find_skill_folders, read_skill_folder

        results = []
        for folder in await asyncio.to_thread(find_skill_folders, Path(path)):
            draft = await asyncio.to_thread(read_skill_folder, folder)
            results.append(await self.register_draft(draft.model_copy(update={"source": "import"})))
        return results


class SkillDraft(BaseModel):
    """A skill not yet registered (from capture or a SKILL.md folder)."""

    name: str
    description: str
    code: str
    language: str = "python"
    parameters: dict[str, Any] | None = None
    example_prompts: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    entrypoint: str | None = None
    source: str = "capture"
    generalised_by_llm: bool = False


_ERROR_LINE = re.compile(r"(error|exception|traceback|failed|fatal|denied|not found|no such)", re.IGNORECASE)


def _error_summary(output: str, limit: int = 300) -> str | None:
    """The last error-looking line of an output (else its last line), clipped."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    errors = [ln for ln in lines if _ERROR_LINE.search(ln)]
    return _clip((errors or lines)[-1], limit)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
