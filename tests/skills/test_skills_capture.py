"""Capture (skills from code that worked, lessons from failures) and SKILL.md export/import."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from support.scripted_llm import Reply, ScriptedLLM, scripted_llm  # noqa: F401  (fixture)
from support.skills import procedural_memory

from agent_memory import MemoryStore
from agent_memory.skills import ProceduralMemory, read_skill_folder

WORKED = """\
import csv


def column_total(path: str, column: str) -> float:
    with open(path, newline="") as fh:
        return sum(float(row[column]) for row in csv.DictReader(fh))


print(column_total("sales.csv", "amount"))
"""


def memory(store: MemoryStore, user: str, tmp_path: Path, agent: str = "coder", **kwargs: object) -> ProceduralMemory:
    return procedural_memory(store, user, agent, work_dir=tmp_path / "sandbox", **kwargs)


async def test_success_capture_freezes_the_function_and_keeps_the_inputs_as_defaults(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    (tmp_path / "sandbox").mkdir(exist_ok=True)  # the executor made it
    (tmp_path / "sandbox" / "sales.csv").write_text("amount,region\n10.5,eu\n4.5,us\n")
    draft = await skills.propose_skill_from_success("total the amount column of sales.csv", WORKED)
    assert draft.name == "column_total"
    assert "print(" not in draft.code and "def column_total" in draft.code
    assert draft.parameters is not None
    assert draft.parameters["properties"]["path"]["default"] == "sales.csv"
    assert draft.parameters["required"] == []
    assert "success-derived" in draft.tags

    registered = await skills.register_draft(draft)
    assert registered.skill.source == "capture"
    same_task = await skills.use_skill("column_total")
    assert same_task.output.strip() == "15.0"
    (tmp_path / "sandbox" / "costs.csv").write_text("eur\n1\n2\n")
    assert (await skills.use_skill("column_total", {"path": "costs.csv", "column": "eur"})).output.strip() == "3.0"


async def test_script_without_function_is_captured_as_it_ran(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path)
    draft = await skills.propose_skill_from_success(
        "print the python version", "import sys\nprint(sys.version_info[0])\n"
    )
    assert (draft.name, draft.parameters) == ("print_python_version", None)
    await skills.register_draft(draft)
    assert (await skills.use_skill("print_python_version")).output.strip() == "3"


async def test_a_configured_model_generalises_the_parameters(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    generalised = {
        "name": "sum_csv_column",
        "description": "Sum one numeric column of a CSV file",
        "code": "import csv\n\ndef sum_csv_column(path: str = 'sales.csv', column: str = 'amount') -> float:\n"
        "    with open(path, newline='') as fh:\n        return sum(float(r[column]) for r in csv.DictReader(fh))\n",
        "example_prompts": ["sum the price column of orders.csv"],
    }
    scripted_llm.add(Reply.text(f"```json\n{json.dumps(generalised)}\n```"))
    skills = memory(store, user_id, tmp_path, model_client=scripted_llm.model_client())
    draft = await skills.propose_skill_from_success("total the amount column of sales.csv", WORKED)
    assert (draft.name, draft.generalised_by_llm) == ("sum_csv_column", True)
    assert draft.parameters is not None and set(draft.parameters["properties"]) == {"path", "column"}
    assert "sum the price column of orders.csv" in draft.example_prompts
    assert "total the amount column of sales.csv" in scripted_llm.requests[0].text


async def test_an_invalid_model_answer_falls_back_to_the_deterministic_draft(
    store: MemoryStore,
    user_id: str,
    tmp_path: Path,
    scripted_llm: ScriptedLLM,  # noqa: F811
) -> None:
    scripted_llm.add(Reply.text('{"name": "x", "code": "def y(:"}'))
    skills = memory(store, user_id, tmp_path, model_client=scripted_llm.model_client())
    draft = await skills.propose_skill_from_success("total the amount column of sales.csv", WORKED)
    assert (draft.name, draft.generalised_by_llm) == ("column_total", False)


async def test_failure_lessons_are_recalled_for_similar_tasks_only(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    key = await skills.record_failure_lesson(
        "parse the CSV export from the billing system",
        "Traceback (most recent call last):\n  ...\nUnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9",
        "open billing CSV exports with encoding='latin-1'",
    )
    item = await store.get(key, user_id=user_id)
    assert (item.memory_type, item.metadata["tags"]) == ("lesson", ["failure-derived"])
    lessons = await skills.recall_lessons("load the billing CSV export into a table")
    assert [lesson.key for lesson in lessons] == [key]
    assert lessons[0].do == "open billing CSV exports with encoding='latin-1'"
    assert "UnicodeDecodeError" in lessons[0].error
    assert "latin-1" in lessons[0].render()
    assert await skills.recall_lessons("resize the profile pictures") == []


async def test_lessons_stay_with_their_user_and_agent(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await memory(store, user_id, tmp_path).record_failure_lesson(
        "parse the billing CSV export", "UnicodeDecodeError", "use encoding='latin-1'"
    )
    assert await memory(store, other_user_id, tmp_path).recall_lessons("parse the billing CSV export") == []
    assert await memory(store, user_id, tmp_path, agent="analyst").recall_lessons("parse the billing CSV export") == []


async def test_old_lessons_are_pruned(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    skills = memory(store, user_id, tmp_path)
    key = await skills.record_failure_lesson("parse the billing CSV", "UnicodeDecodeError", "use latin-1")
    assert await skills.prune_lessons(older_than_days=180) == []
    assert await skills.prune_lessons(older_than_days=180, as_of=datetime.now(UTC) + timedelta(days=181)) == [key]
    assert await skills.recall_lessons("parse the billing CSV") == []


async def test_export_import_round_trip_through_skill_md_folders(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    source = memory(store, user_id, tmp_path)
    draft = await source.propose_skill_from_success("total the amount column of sales.csv", WORKED)
    original = (await source.register_draft(draft)).skill
    await source.register_skill("greet_sh", "Greet someone in bash", 'echo "hi $name"\n', language="bash",
                                parameters={"type": "object", "properties": {"name": {"type": "string"}}})  # fmt: skip
    folders = await source.export_skills(tmp_path / "export")
    assert sorted(f.name for f in folders) == ["column-total", "greet-sh"]

    skill_md = (tmp_path / "export" / "column-total" / "SKILL.md").read_text()
    front = yaml.safe_load(skill_md.split("---")[1])
    assert front["name"] == "column-total"
    assert front["description"] == original.description
    assert all(isinstance(v, str) for v in front["metadata"].values())  # Agent Skills: string -> string
    assert (tmp_path / "export" / "column-total" / "scripts" / "column_total.py").read_text() == original.code

    target = memory(store, other_user_id, tmp_path, agent="analyst")
    results = await target.import_skills(tmp_path / "export")
    assert [r.action for r in results] == ["created", "created"]
    imported = await target.get_skill("column_total")
    assert (imported.code, imported.parameters, imported.description, imported.source) == (
        original.code, original.parameters, original.description, "import",
    )  # fmt: skip
    assert (await target.get_skill("greet_sh")).language == "bash"
    # importing again changes nothing
    assert [r.action for r in await target.import_skills(tmp_path / "export")] == ["unchanged", "unchanged"]
    assert read_skill_folder(tmp_path / "export" / "greet-sh").code == 'echo "hi $name"\n'


async def test_the_same_lesson_recorded_twice_is_stored_once(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path)
    first = await skills.record_failure_lesson("parse the billing CSV", "UnicodeDecodeError", "use latin-1")
    again = await skills.record_failure_lesson("parse the billing CSV", "UnicodeDecodeError", "use latin-1")
    other = await skills.record_failure_lesson("parse the billing CSV", "UnicodeDecodeError", "use cp1252")
    assert first == again != other
    assert len(await store.list(user_id=user_id, memory_type="lesson")) == 2
