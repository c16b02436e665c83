"""The skills wing of agent-memory."""

from ._procedural import (
    STATUSES,
    ProceduralMemory,
    ProceduralMemorySettings,
    RegisterResult,
    Skill,
    SkillError,
    SkillLimitReached,
    SkillNotActive,
    SkillNotFound,
    SkillRegistry,
    SkillStatus,
    SkillVersion,
)
from ._skill_md import read_skill_folder, write_skill_folder
from ._tools import SkillSearchResult, skill_tools, skills_system_message

__all__ = [
    "STATUSES",
    "ProceduralMemory",
    "ProceduralMemorySettings",
    "RegisterResult",
    "Skill",
    "SkillError",
    "SkillLimitReached",
    "SkillNotActive",
    "SkillNotFound",
    "SkillRegistry",
    "SkillSearchResult",
    "SkillStatus",
    "SkillVersion",
    "read_skill_folder",
    "skill_tools",
    "skills_system_message",
    "write_skill_folder",
]
