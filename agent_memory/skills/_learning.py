"""Learning from a finished run: a failure that was then fixed becomes a lesson, the code that worked a skill
proposal (pending approval by default), deterministically ("hybrid capture": no model needed).

Example:
    >>> fix_description("open(p)\\n", "open(p, encoding='latin-1')\\n")
    "use `open(p, encoding='latin-1')` instead of `open(p)`"
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Sequence

from autogen_agentchat.messages import (
    BaseAgentEvent,
    BaseChatMessage,
    CodeExecutionEvent,
    TextMessage,
    ToolCallRequestEvent,
)
from pydantic import BaseModel

from ._models import RegisterResult, SkillError, SkillStatus
from ._procedural import ProceduralMemory

log = logging.getLogger(__name__)
_PY_BLOCK = re.compile(r"```[ \t]*(?:python|py)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def _python_runs(messages: Sequence[BaseAgentEvent | BaseChatMessage], coder: str) -> list[tuple[str, bool, str]]:
    """(code, succeeded, executor text) for each coder message with Python blocks that the executor ran."""
    runs: list[tuple[str, bool, str]] = []
    pending: str | None = None
    for message in messages:
        if isinstance(message, TextMessage) and message.source == coder:
            blocks = _PY_BLOCK.findall(message.content)
            pending = "\n\n".join(b.strip() + "\n" for b in blocks) if blocks else None
        elif isinstance(message, CodeExecutionEvent) and pending is not None:
            runs.append((pending, message.result.exit_code == 0, message.result.output))
            pending = None
    return runs


def fix_description(failed: str, fixed: str, limit: int = 3) -> str:
    """What changed between code that failed and code that worked, as "use X instead of Y" (deterministic)."""
    removed: list[str] = []
    added: list[str] = []
    for line in difflib.unified_diff(failed.splitlines(), fixed.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        text = line[1:].strip()
        if not text or text.startswith("#"):
            continue
        (removed if line.startswith("-") else added).append(text)
    if not added and not removed:
        return "run the same code again (it failed once, then worked)"
    parts = []
    if added:
        parts.append("use " + "; ".join(f"`{a[:120]}`" for a in added[:limit]))
    if removed:
        parts.append("instead of " + "; ".join(f"`{r[:120]}`" for r in removed[:limit]))
    return " ".join(parts)


class LearnedFromRun(BaseModel):
    """What :func:`learn_from_run` stored."""

    skill: RegisterResult | None = None
    lessons: list[str] = []


async def learn_from_run(
    memory: ProceduralMemory | None,
    task: str,
    messages: Sequence[BaseAgentEvent | BaseChatMessage],
    *,
    coder: str = "coder",
    skill_status: SkillStatus | None = "pending_approval",
) -> LearnedFromRun:
    """Capture from a finished run, deterministically:

    * each failed Python run followed by a successful one becomes a lesson: when ``task``, error -> the change
      that fixed it (:func:`fix_description`);
    * the last Python code that worked is proposed as a skill (``skill_status``, pending approval by default),
      unless the agent already called ``register_skill`` or agents may not register skills.

    Nothing happens when procedural memory is off (``memory`` None or disabled).
    """
    learned = LearnedFromRun()
    if memory is None or not memory.settings.enabled:
        return learned
    runs = _python_runs(messages, coder)
    for i, (code, ok, output) in enumerate(runs):
        if ok or i + 1 >= len(runs):
            continue
        fixed = next((c for c, later_ok, _ in runs[i + 1 :] if later_ok), None)
        if fixed is not None:
            learned.lessons.append(await memory.record_failure_lesson(task, output, fix_description(code, fixed)))
    registered = any(
        isinstance(m, ToolCallRequestEvent) and any(c.name == "register_skill" for c in m.content) for m in messages
    )
    working = [c for c, ok, _ in runs if ok]
    if working and not registered and memory.settings.auto_register_skills:
        draft = await memory.propose_skill_from_success(task, working[-1])
        try:
            learned.skill = await memory.register_draft(draft, status=skill_status)
        except SkillError as exc:  # e.g. the skill limit: learning is best effort, the run already succeeded
            log.info("captured skill %r not registered: %s", draft.name, exc)
    return learned
