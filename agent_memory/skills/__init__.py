"""The skills wing: procedural memory (skills learned from code that worked, searched and reused) and lessons.

Skills run in an executor handed in by the caller (the agents wing's sandbox); this wing never imports agents.

Example:
    >>> ProceduralMemorySettings().enabled  # off by default: agents are unchanged
    False
"""

from ._hints import HINT_HEADER, LESSON_HEADER, SkillHints, SkillHintsConfig
from ._learning import LearnedFromRun, fix_description, learn_from_run
from ._models import (
    STATUSES,
    Lesson,
    ProceduralMemorySettings,
    RegisterResult,
    Skill,
    SkillDraft,
    SkillError,
    SkillLimitReached,
    SkillNotActive,
    SkillNotFound,
    SkillRun,
    SkillStats,
    SkillStatus,
    SkillVersion,
)
from ._procedural import ProceduralMemory
from ._registry import SkillRegistry
from ._skill_md import read_skill_folder, write_skill_folder
from ._tools import SkillSearchResult, skill_tools, skills_system_message

__all__ = [
    "HINT_HEADER",
    "LESSON_HEADER",
    "STATUSES",
    "LearnedFromRun",
    "Lesson",
    "ProceduralMemory",
    "ProceduralMemorySettings",
    "RegisterResult",
    "Skill",
    "SkillDraft",
    "SkillError",
    "SkillHints",
    "SkillHintsConfig",
    "SkillLimitReached",
    "SkillNotActive",
    "SkillNotFound",
    "SkillRegistry",
    "SkillRun",
    "SkillSearchResult",
    "SkillStats",
    "SkillStatus",
    "SkillVersion",
    "fix_description",
    "learn_from_run",
    "read_skill_folder",
    "skill_tools",
    "skills_system_message",
    "write_skill_folder",
]
