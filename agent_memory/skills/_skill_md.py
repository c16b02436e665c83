"""Skills as Agent Skills folders: ``<name>/SKILL.md`` (YAML front matter + instructions) and ``scripts/<file>``.

The front matter holds the Agent Skills fields ``name`` (lowercase, hyphens, equal to the folder name) and
``description``; everything agent-memory needs to re-register the skill exactly lives in ``metadata`` (string
values, as the format asks): the original skill name, language, entrypoint, version, tags, and the parameter
schema and example prompts as JSON. The body explains the skill to a human or another agent.

Example:
    >>> from pathlib import Path
    >>> folder = write_skill_folder(Path("/tmp/skills-out"), skill)  # doctest: +SKIP
    >>> read_skill_folder(folder).code == skill.code  # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from ._code import identifier
from ._models import Skill, SkillDraft, SkillError

SKILL_FILE = "SKILL.md"


def folder_name(skill_name: str) -> str:
    """Agent Skills names: lowercase letters, digits and single hyphens."""
    return re.sub(r"-+", "-", skill_name.replace("_", "-")).strip("-")


def _body(skill: Skill, script: str) -> str:
    lines = [f"# {skill.name}", "", skill.description, ""]
    if skill.example_prompts:
        lines += ["## When to use", "", *[f"- {p}" for p in skill.example_prompts], ""]
    props = (skill.parameters or {}).get("properties") or {}
    required = set((skill.parameters or {}).get("required") or [])
    if props:
        lines += ["## Parameters", "", "| name | type | required | default |", "|---|---|---|---|"]
        for key, prop in props.items():
            kind = prop.get("type", "any") if isinstance(prop, dict) else "any"
            default = json.dumps(prop["default"]) if isinstance(prop, dict) and "default" in prop else ""
            lines.append(f"| {key} | {kind} | {'yes' if key in required else 'no'} | {default} |")
        lines.append("")
    lines += ["## How to run", ""]
    if skill.language == "python" and skill.entrypoint:
        lines.append(f"Call `{skill.entrypoint}(**parameters)` from `{script}`; it returns the result.")
    elif skill.language == "python":
        lines.append(f"Run `{script}` with a global `params` dict holding the parameters.")
    else:
        lines.append(f"Run `bash {script}` with `SKILL_PARAMS` (JSON) and one variable per parameter exported.")
    lines.append("")
    return "\n".join(lines)


def write_skill_folder(directory: Path, skill: Skill) -> Path:
    """Write ``skill`` under ``directory`` and return its folder (existing files of that skill are replaced)."""
    folder = directory / folder_name(skill.name)
    (folder / "scripts").mkdir(parents=True, exist_ok=True)
    script = f"scripts/{identifier(skill.name)}.{'py' if skill.language == 'python' else 'sh'}"
    (folder / script).write_text(skill.code, encoding="utf-8", newline="")
    front: dict[str, Any] = {
        "name": folder_name(skill.name),
        "description": skill.description[:1024],
        "metadata": {
            "agent-memory-skill": skill.name,
            "language": skill.language,
            "script": script,
            "entrypoint": skill.entrypoint or "",
            "version": str(skill.version),
            "tags": json.dumps(skill.tags),
            "parameters": json.dumps(skill.parameters, sort_keys=True),
            "example-prompts": json.dumps(skill.example_prompts, ensure_ascii=False),
            "full-description": skill.description,
        },
    }
    text = "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000) + "---\n\n"
    (folder / SKILL_FILE).write_text(text + _body(skill, script), encoding="utf-8")
    return folder


def _front_matter(text: str, where: Path) -> dict[str, Any]:
    match = re.match(r"\A---\r?\n(.*?)\r?\n---\r?\n?", text, re.DOTALL)
    if not match:
        raise SkillError(f"{where} has no YAML front matter (a block between '---' lines at the top)")
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise SkillError(f"{where}: invalid YAML front matter: {exc}") from None
    if not isinstance(data, dict):
        raise SkillError(f"{where}: the front matter must be a mapping with name and description")
    return data


def _json_field(meta: dict[str, Any], key: str, default: Any, where: Path) -> Any:
    raw = meta.get(key)
    if raw in (None, ""):
        return default
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SkillError(f"{where}: metadata.{key} is not valid JSON: {exc}") from None


def read_skill_folder(folder: Path) -> SkillDraft:
    """A :class:`SkillDraft` from an Agent Skills folder (ours, or any with one Python/bash script)."""
    path = folder / SKILL_FILE
    if not path.is_file():
        raise SkillError(f"{folder} has no {SKILL_FILE}")
    front = _front_matter(path.read_text(encoding="utf-8"), path)
    meta = front.get("metadata") or {}
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: metadata must be a mapping")
    name = str(meta.get("agent-memory-skill") or front.get("name") or "").strip()
    description = str(meta.get("full-description") or front.get("description") or "").strip()
    if not name or not description:
        raise SkillError(f"{path}: name and description are required")
    script_rel = meta.get("script")
    if isinstance(script_rel, str) and script_rel:
        script = (folder / script_rel).resolve()
        if folder.resolve() not in script.parents:
            raise SkillError(f"{path}: metadata.script must stay inside the skill folder")
    else:
        candidates = sorted((folder / "scripts").glob("*.py")) + sorted((folder / "scripts").glob("*.sh"))
        if len(candidates) != 1:
            raise SkillError(f"{folder}: expected exactly one script in scripts/ (found {len(candidates)})")
        script = candidates[0]
    if not script.is_file():
        raise SkillError(f"{folder}: script {script_rel} is missing")
    language = str(meta.get("language") or ("bash" if script.suffix == ".sh" else "python"))
    parameters = _json_field(meta, "parameters", None, path)
    return SkillDraft(
        name=name.replace("-", "_") if "agent-memory-skill" not in meta else name,
        description=description,
        code=script.read_text(encoding="utf-8"),
        language=language,
        parameters=parameters if isinstance(parameters, dict) else None,
        example_prompts=[str(p) for p in _json_field(meta, "example-prompts", [], path)],
        tags=[str(t) for t in _json_field(meta, "tags", [], path)],
        entrypoint=str(meta.get("entrypoint")) or None if meta.get("entrypoint") else None,
        source="import",
    )


def find_skill_folders(path: Path) -> list[Path]:
    """``path`` itself when it holds SKILL.md, else its sub-folders that do."""
    if (path / SKILL_FILE).is_file():
        return [path]
    if not path.is_dir():
        raise SkillError(f"{path} is not a directory")
    return sorted(p.parent for p in path.glob(f"*/{SKILL_FILE}"))
