"""Procedural memory: skills registered, found, run and counted per (user, agent)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.databases import open_store
from support.skills import procedural_memory

from agent_memory import MemoryStore
from agent_memory.agents import LocalProcessGroupExecutor
from agent_memory.context import describe
from agent_memory.skills import (
    ProceduralMemory,
    ProceduralMemorySettings,
    SkillError,
    SkillLimitReached,
    SkillNotActive,
    SkillNotFound,
)

COUNT_WORDS = '''\
def count_words(text: str, top: int = 2) -> dict:
    """Count words; return the total and the most frequent ones."""
    words = text.lower().split()
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"total": len(words), "top": best}
'''

BROKEN_COUNT = """\
def count_words_fast(text: str) -> dict:
    raise RuntimeError("tokenizer missing")
"""


def memory(store: MemoryStore, user: str, tmp_path: Path, agent: str = "coder", **settings: object) -> ProceduralMemory:
    return procedural_memory(
        store, user, agent, settings=ProceduralMemorySettings(**settings), work_dir=tmp_path / user
    )


async def test_registered_skill_is_found_and_runs_with_validated_parameters(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    registered = await skills.register_skill(
        "count_words",
        "Count the words of a text and the most frequent ones",
        COUNT_WORDS,
        example_prompts=["how many words are in this text"],
    )
    assert registered.action == "created"
    assert registered.skill.parameters["required"] == ["text"]
    assert registered.skill.parameters["properties"]["top"] == {"type": "integer", "default": 2}

    found = await skills.search_skills("count the words in my text")
    assert [s.name for s in found] == ["count_words"]

    run = await skills.use_skill("count_words", {"text": "b a b c b a"})
    assert run.success
    assert run.output.strip() == '{"top": [["b", 3], ["a", 2]], "total": 6}'
    skill = await skills.get_skill("count_words")
    assert (skill.execution_count, skill.success_count) == (1, 1)
    assert skill.last_used_at is not None


async def test_unrelated_query_finds_nothing(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    assert await skills.search_skills("deploy the kubernetes cluster to production") == []


async def test_another_user_never_finds_or_runs_the_skill(
    store: MemoryStore, user_id: str, other_user_id: str, tmp_path: Path
) -> None:
    await memory(store, user_id, tmp_path).register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    other = memory(store, other_user_id, tmp_path)
    assert await other.search_skills("count the words of a text") == []
    assert await other.list_skills() == []
    with pytest.raises(SkillNotFound):
        await other.use_skill("count_words", {"text": "a"})
    with pytest.raises(SkillNotFound):
        await other.approve("count_words")


async def test_another_agent_of_the_same_user_does_not_see_the_skill(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    await memory(store, user_id, tmp_path, agent="coder").register_skill("count_words", "Count words", COUNT_WORDS)
    analyst = memory(store, user_id, tmp_path, agent="analyst")
    assert await analyst.search_skills("count words") == []
    with pytest.raises(SkillNotFound):
        await analyst.get_skill("count_words")


async def test_invalid_parameters_are_refused_before_anything_runs(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words", "Count words", COUNT_WORDS)
    with pytest.raises(SkillError, match="'text' is a required property"):
        await skills.use_skill("count_words", {})
    with pytest.raises(SkillError, match="is not of type 'integer'"):
        await skills.use_skill("count_words", {"text": "a", "top": "three"})
    with pytest.raises(SkillError, match="Additional properties"):
        await skills.use_skill("count_words", {"text": "a", "colour": "red"})
    assert (await skills.get_skill("count_words")).execution_count == 0


async def test_without_an_executor_nothing_runs_and_the_error_says_how_to_hand_one_in(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = ProceduralMemory(store, user_id=user_id, agent_id="coder")  # no executor handed in
    await skills.register_skill("count_words", "Count words", COUNT_WORDS)
    with pytest.raises(SkillError, match=r"no executor to run skills in: hand one in with .*executor=.*use_executor"):
        await skills.use_skill("count_words", {"text": "a b"})
    assert (await skills.get_skill("count_words")).execution_count == 0
    skills.use_executor(LocalProcessGroupExecutor(timeout=10, work_dir=tmp_path / "late"))
    assert (await skills.use_skill("count_words", {"text": "a b"})).success


async def test_approval_required_gates_use_until_approved(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path, require_skill_approval=True)
    result = await skills.register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    assert result.skill.status == "pending_approval"
    assert await skills.search_skills("count the words") == []
    with pytest.raises(SkillNotActive, match="waiting for approval"):
        await skills.use_skill("count_words", {"text": "a b"})
    await skills.approve("count_words")
    assert [s.name for s in await skills.search_skills("count the words")] == ["count_words"]
    assert (await skills.use_skill("count_words", {"text": "a b"})).success


async def test_rejected_and_disabled_skills_cannot_run(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words", "Count words", COUNT_WORDS)
    await skills.reject("count_words")
    with pytest.raises(SkillNotActive, match="rejected"):
        await skills.use_skill("count_words", {"text": "a"})
    await skills.disable("count_words")
    with pytest.raises(SkillNotActive, match="disabled"):
        await skills.use_skill("count_words", {"text": "a"})
    assert await skills.search_skills("count words") == []


async def test_broken_skill_loses_its_success_rate_and_its_rank(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words_fast", "Count the words of a text quickly", BROKEN_COUNT)
    await skills.register_skill("count_words", "Count the words of a text", COUNT_WORDS)
    query = "count the words of a text quickly"
    assert [s.name for s in await skills.search_skills(query)] == ["count_words_fast", "count_words"]
    runs = [await skills.use_skill("count_words_fast", {"text": "a b"}) for _ in range(3)]
    assert not any(r.success for r in runs)
    assert "tokenizer missing" in runs[0].output
    assert 'File "<skill count_words_fast>", line 2' in runs[0].output
    assert 'raise RuntimeError("tokenizer missing")' in runs[0].output  # the skill's own line in the traceback
    await skills.use_skill("count_words", {"text": "a b"})

    broken = await skills.get_skill("count_words_fast")
    assert (broken.execution_count, broken.success_rate) == (3, 0.0)
    assert broken.last_error is not None and "tokenizer missing" in broken.last_error
    found = await skills.search_skills(query)
    assert [s.name for s in found] == ["count_words", "count_words_fast"]
    assert found[0].score is not None and found[1].score is not None and found[0].score > found[1].score


async def test_reregistering_changed_code_makes_a_new_version_with_history(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    first = await skills.register_skill("count_words_fast", "Count words quickly", BROKEN_COUNT)
    await skills.use_skill("count_words_fast", {"text": "a b"})
    same = await skills.register_skill("count_words_fast", "Count words quickly", BROKEN_COUNT)
    assert (first.skill.version, same.action, same.skill.version) == (1, "unchanged", 1)

    fixed = "def count_words_fast(text: str) -> int:\n    return len(text.split())\n"
    second = await skills.register_skill("count_words_fast", "Count words quickly", fixed)
    assert (second.action, second.skill.version, second.skill.execution_count) == ("new_version", 2, 0)
    run = await skills.use_skill("count_words_fast", {"text": "a b c"})
    assert (run.version, run.success, run.output.strip()) == (2, True, "3")

    history = await skills.versions("count_words_fast")
    assert [(v.version, v.execution_count, v.success_count) for v in history] == [(1, 1, 0), (2, 1, 1)]
    assert history[0].code == BROKEN_COUNT and history[1].code == fixed


async def test_max_skills_per_user_is_enforced_per_agent(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path, max_skills_per_user=1)
    await skills.register_skill("count_words", "Count words", COUNT_WORDS)
    with pytest.raises(SkillLimitReached):
        await skills.register_skill("count_words_fast", "Count words quickly", BROKEN_COUNT)
    # a new version of an existing skill is not a new skill
    assert (await skills.register_skill("count_words", "Count all words", COUNT_WORDS)).action == "new_version"


async def test_bad_code_or_schema_is_refused_with_a_clear_message(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    with pytest.raises(SkillError, match="not valid Python"):
        await skills.register_skill("broken", "Broken", "def broken(:\n  pass\n")
    with pytest.raises(SkillError, match="invalid skill name"):
        await skills.register_skill("Count Words!", "Count", COUNT_WORDS)
    with pytest.raises(SkillError, match="does not declare"):
        await skills.register_skill("count_words", "Count", COUNT_WORDS, parameters={"properties": {"top": {}}})


async def test_script_skill_reads_params_and_bash_skill_gets_variables(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    await skills.register_skill("greet", "Greet someone", "print('hello ' + params['name'])\n", parameters=schema)
    await skills.register_skill("greet_sh", "Greet someone in bash", 'echo "hi $name"\n', language="bash",
                                parameters=schema)  # fmt: skip
    assert (await skills.use_skill("greet", {"name": "Ada"})).output.strip() == "hello Ada"
    assert (await skills.use_skill("greet_sh", {"name": "Ada; rm -rf /"})).output.strip() == "hi Ada; rm -rf /"


async def test_timeout_counts_as_a_failure(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path, execution_timeout=1)
    await skills.register_skill("wait", "Wait a long time", "import time\ntime.sleep(30)\n")
    run = await skills.use_skill("wait")
    assert (run.success, run.timed_out) == (False, True)
    assert (await skills.get_skill("wait")).success_count == 0


async def test_pruning_removes_unused_and_unreliable_skills(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words", "Count words", COUNT_WORDS)
    await skills.register_skill("count_words_fast", "Count words quickly", BROKEN_COUNT)
    for _ in range(3):
        await skills.use_skill("count_words_fast", {"text": "a"})
    assert await skills.prune(unused_days=90) == []  # everything is fresh
    unreliable = await skills.prune(unused_days=None, min_success_rate=0.5, min_executions=3)
    assert [s.name for s in unreliable] == ["count_words_fast"]
    later = datetime.now(UTC) + timedelta(days=91)
    assert [s.name for s in await skills.prune(unused_days=90, as_of=later, dry_run=True)] == ["count_words"]
    assert [s.name for s in await skills.list_skills()] == ["count_words"]
    await skills.prune(unused_days=90, as_of=later)
    assert await skills.list_skills() == []


async def test_stats_count_runs_by_status(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words", "Count words", COUNT_WORDS)
    await skills.register_skill("count_words_fast", "Count words quickly", BROKEN_COUNT)
    await skills.disable("count_words_fast")
    await skills.use_skill("count_words", {"text": "a"})
    stats = await skills.stats()
    assert (stats.total, stats.by_status, stats.executions, stats.success_rate) == (
        2, {"active": 1, "disabled": 1}, 1, 1.0,
    )  # fmt: skip


async def test_big_output_is_stored_in_memory_and_only_an_excerpt_returned(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path, max_output_chars=1000)
    await skills.register_skill(
        "many_lines", "Print many numbered lines", "for i in range(5000):\n    print('line', i)\n"
    )
    run = await skills.use_skill("many_lines")
    assert run.success and run.truncated and run.memory_key is not None
    assert len(run.output) < 1000 and "line 0" in run.output and "line 4999" in run.output
    full = await store.retrieve(run.memory_key, user_id=user_id)
    assert full == "".join(f"line {i}\n" for i in range(5000))
    assert f"Full output stored as {run.memory_key}" in run.render()
    [item] = await store.list(user_id=user_id)
    assert item.metadata["offloaded_by"] == "ProceduralMemory" and item.metadata["skill"] == "many_lines"
    assert item.description == describe(full, kind="skill many_lines v1")  # the one offloader's description


async def test_big_output_the_store_refuses_is_cut_to_an_excerpt_with_no_key(
    database_url: str, user_id: str, tmp_path: Path
) -> None:
    async with await open_store(database_url, max_content_bytes=4096) as small:
        skills = memory(small, user_id, tmp_path, max_output_chars=1000)
        await skills.register_skill(
            "many_lines", "Print many numbered lines", "for i in range(5000):\n    print('line', i)\n"
        )
        run = await skills.use_skill("many_lines")
        assert run.success and run.truncated and run.memory_key is None
        assert len(run.output) < 1000 and "line 0" in run.output and "line 4999" in run.output
        assert await small.list(user_id=user_id) == []
        assert (await skills.get_skill("many_lines")).execution_count == 1


class DatabaseGoesDownDuringTheRun(LocalProcessGroupExecutor):
    """Runs the code, then closes the store's pool: the database is gone by the time the output is stored."""

    def __init__(self, store: MemoryStore, work_dir: Path) -> None:
        super().__init__(timeout=60, work_dir=work_dir)
        self._store = store

    async def execute_code_blocks(self, code_blocks, cancellation_token):  # type: ignore[no-untyped-def]
        result = await super().execute_code_blocks(code_blocks, cancellation_token)
        await self._store.close()
        return result


async def test_big_output_is_returned_in_full_while_the_database_is_down(
    store: MemoryStore, database_url: str, user_id: str, tmp_path: Path
) -> None:
    doomed = await open_store(database_url)
    skills = ProceduralMemory(
        doomed, user_id=user_id, agent_id="coder", settings=ProceduralMemorySettings(max_output_chars=1000),
        executor=DatabaseGoesDownDuringTheRun(doomed, tmp_path),
    )  # fmt: skip
    await skills.register_skill(
        "many_lines", "Print many numbered lines", "for i in range(5000):\n    print('line', i)\n"
    )
    run = await skills.use_skill("many_lines")
    assert run.success and not run.truncated and run.memory_key is None
    assert run.output == "".join(f"line {i}\n" for i in range(5000))
    assert await store.list(user_id=user_id) == []


async def test_concurrent_registrations_respect_the_limit(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    import asyncio

    skills = memory(store, user_id, tmp_path, max_skills_per_user=3)
    code = "def f_{0}(x: int) -> int:\n    return x + {0}\n"
    results = await asyncio.gather(
        *(skills.register_skill(f"f_{i}", f"add {i}", code.format(i)) for i in range(8)), return_exceptions=True
    )
    assert sum(not isinstance(r, Exception) for r in results) == 3
    assert all(isinstance(r, SkillLimitReached) for r in results if isinstance(r, Exception))
    assert len(await skills.list_skills()) == 3


async def test_a_rejected_skill_stays_rejected_when_the_agent_registers_a_new_version(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    skills = memory(store, user_id, tmp_path)
    await skills.register_skill("count_words_fast", "Count words quickly", BROKEN_COUNT)
    await skills.reject("count_words_fast")
    again = await skills.register_skill("count_words_fast", "Count words", "def count_words_fast(text: str) -> int:\n"
                                        "    return len(text.split())\n")  # fmt: skip
    assert (again.action, again.skill.version, again.skill.status) == ("new_version", 2, "rejected")
    await skills.approve("count_words_fast")
    assert (await skills.use_skill("count_words_fast", {"text": "a b"})).output.strip() == "2"
