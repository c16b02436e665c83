"""MemoryToolbox: the one implementation behind the AutoGen tools and the MCP server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_memory import MemoryStore
from agent_memory.placeholders import parse_memory_refs
from agent_memory.tools import MemoryToolbox, MemoryToolError, parse_since

BIG_LOG = "".join(f"line {i} ok\n" for i in range(1, 30_001)).replace(
    "line 17345 ok\n", "line 17345 FATAL: token=XK-4471 expired\n"
)


@pytest.fixture
def toolbox(store: MemoryStore, user_id: str) -> MemoryToolbox:
    return MemoryToolbox(store, user_id, agent_id="coder", thread_id="t-1")


async def test_store_then_retrieve_returns_exact_content(toolbox: MemoryToolbox) -> None:
    content = "exact\r\nbytes\x00with NUL\n\ttab é 😀"
    saved = await toolbox.store_memory(content, "odd text", "note")
    got = await toolbox.retrieve_memory(saved.key)
    assert got.content == content
    assert got.truncated is False
    assert got.view == "full"


async def test_store_returns_a_parseable_placeholder(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory("pip install output\n" * 50, "pip install log", "command_output")
    refs = parse_memory_refs(saved.placeholder)
    assert [r.key for r in refs] == [saved.key]
    assert refs[0].tokens == saved.token_count > 0
    assert saved.key.startswith("cmd_")


async def test_store_records_agent_thread_and_source(toolbox: MemoryToolbox, store: MemoryStore) -> None:
    saved = await toolbox.store_memory("x", "tagged")
    item = await store.get(saved.key, user_id=toolbox.user_id)
    assert (item.agent_id, item.thread_id, item.metadata) == ("coder", "t-1", {"source": "tool"})


async def test_grep_finds_the_planted_line_in_a_big_output(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory(BIG_LOG, "30k line log", "command_output")
    got = await toolbox.retrieve_memory(saved.key, grep="FATAL", context=1)
    assert got.content == "17344-line 17344 ok\n17345:line 17345 FATAL: token=XK-4471 expired\n17346-line 17346 ok"
    assert got.total_lines == 30_000
    assert got.truncated is False


async def test_full_retrieve_of_a_big_output_is_capped_with_a_continuation_hint(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory(BIG_LOG, "30k line log", "command_output")
    got = await toolbox.retrieve_memory(saved.key, max_chars=1000)
    assert got.truncated is True
    assert len(got.content) <= 1000
    assert BIG_LOG.startswith(got.content)
    shown = got.content.count("\n")
    assert got.hint is not None and f"lines='{shown + 1}-" in got.hint
    # Following the hint continues exactly where the first page stopped.
    nxt = await toolbox.retrieve_memory(saved.key, lines=f"{shown + 1}-{shown + 2}")
    assert nxt.content == f"line {shown + 1} ok\nline {shown + 2} ok\n"


async def test_head_tail_and_lines_views(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory("a\nb\nc\nd\ne\n", "letters")
    assert (await toolbox.retrieve_memory(saved.key, head=2)).content == "a\nb\n"
    assert (await toolbox.retrieve_memory(saved.key, tail=1)).content == "e\n"
    assert (await toolbox.retrieve_memory(saved.key, lines="2-3")).content == "b\nc\n"


async def test_grep_without_match_says_so(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory("alpha\nbeta\n", "greek")
    got = await toolbox.retrieve_memory(saved.key, grep="GAMMA")
    assert got.content == ""
    assert got.hint is not None and "no line matches" in got.hint


async def test_unknown_key_is_a_clear_error(toolbox: MemoryToolbox) -> None:
    with pytest.raises(MemoryToolError, match=r"no memory with key 'cmd_000000000000'.*search_memory"):
        await toolbox.retrieve_memory("cmd_000000000000")


async def test_another_users_key_looks_exactly_like_a_missing_key(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    mine = MemoryToolbox(store, user_id)
    theirs = MemoryToolbox(store, other_user_id)
    saved = await theirs.store_memory("their secret", "secret")
    with pytest.raises(MemoryToolError) as foreign:
        await mine.retrieve_memory(saved.key)
    with pytest.raises(MemoryToolError) as missing:
        await mine.retrieve_memory("note_ffffffffffff")
    assert str(foreign.value).replace(saved.key, "K") == str(missing.value).replace("note_ffffffffffff", "K")
    with pytest.raises(MemoryToolError):
        await mine.delete_memory(saved.key)
    assert (await theirs.retrieve_memory(saved.key)).content == "their secret"


async def test_invalid_regex_is_a_clear_error(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory("x(1)\n", "paren")
    with pytest.raises(MemoryToolError, match=r"invalid grep regular expression.*Escape"):
        await toolbox.retrieve_memory(saved.key, grep="x(")


async def test_bad_line_range_is_a_clear_error(toolbox: MemoryToolbox) -> None:
    with pytest.raises(MemoryToolError, match="START-END"):
        await toolbox.retrieve_memory("note_ffffffffffff", lines="ten")


async def test_wrong_types_are_clear_errors(toolbox: MemoryToolbox) -> None:
    with pytest.raises(MemoryToolError, match="head must be an integer"):
        await toolbox.retrieve_memory("k", head="5")  # type: ignore[arg-type]
    with pytest.raises(MemoryToolError, match="content must be a string"):
        await toolbox.store_memory(b"bytes", "d")  # type: ignore[arg-type]
    with pytest.raises(MemoryToolError, match="limit must be between 1 and 50"):
        await toolbox.search_memory("x", limit=1000)


async def test_huge_content_is_refused_not_truncated(store: MemoryStore, user_id: str) -> None:
    toolbox = MemoryToolbox(store, user_id, max_store_bytes=1000)
    with pytest.raises(MemoryToolError, match="content is 1001 bytes; this tool stores at most 1000"):
        await toolbox.store_memory("x" * 1001, "too big")
    assert (await toolbox.memory_stats()).total_memories == 0


async def test_search_finds_by_words_best_first(toolbox: MemoryToolbox) -> None:
    await toolbox.store_memory("the staging database is pg-stage-03 on port 5433", "staging db", "user_fact")
    await toolbox.store_memory("lunch order: noodles", "lunch", "note")
    found = await toolbox.search_memory("staging database port")
    assert found.results and found.results[0].description == "staging db"
    assert all(r.score is not None for r in found.results)


async def test_search_filters_by_type(toolbox: MemoryToolbox) -> None:
    await toolbox.store_memory("deploy with make deploy", "deploy how", "lesson")
    await toolbox.store_memory("deploy log: ok", "deploy log", "command_output")
    found = await toolbox.search_memory("deploy", memory_type="lesson")
    assert [r.memory_type for r in found.results] == ["lesson"]


async def test_empty_query_is_refused(toolbox: MemoryToolbox) -> None:
    with pytest.raises(MemoryToolError, match="query is empty"):
        await toolbox.search_memory("   ")


async def test_list_filters_and_reports_more(store: MemoryStore, user_id: str) -> None:
    a = MemoryToolbox(store, user_id, agent_id="a1", thread_id="tA")
    b = MemoryToolbox(store, user_id, agent_id="a2", thread_id="tB")
    for i in range(3):
        await a.store_memory(f"a{i}", f"a{i}", "note")
    await b.store_memory("b0", "b0", "lesson")
    assert [m.description for m in (await a.list_memories(thread_id="tB")).memories] == ["b0"]
    assert [m.description for m in (await a.list_memories(agent_id="a2")).memories] == ["b0"]
    assert {m.description for m in (await a.list_memories(memory_type="note")).memories} == {"a0", "a1", "a2"}
    page = await a.list_memories(limit=2)
    assert page.returned == 2 and page.more is True
    assert (await a.list_memories(since="1h")).returned == 4
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert (await a.list_memories(since=future)).returned == 0


async def test_bad_since_is_a_clear_error(toolbox: MemoryToolbox) -> None:
    with pytest.raises(MemoryToolError, match="neither an ISO date/time"):
        await toolbox.list_memories(since="yesterday-ish")


@pytest.mark.parametrize("since", ["3000000d", "99999999999d", "9" * 5000 + "d"])
async def test_an_age_reaching_past_the_year_1_is_a_clear_error(toolbox: MemoryToolbox, since: str) -> None:
    with pytest.raises(MemoryToolError, match=r"before the year 1|neither an ISO date/time"):
        await toolbox.list_memories(since=since)


def test_parse_since_accepts_iso_and_relative_ages() -> None:
    now = datetime(2026, 2, 1, tzinfo=UTC)
    assert parse_since("7d", now=now) == datetime(2026, 1, 25, tzinfo=UTC)
    assert parse_since("2026-01-31T12:00:00Z") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_since(None) is None


async def test_delete_then_retrieve_is_not_found(toolbox: MemoryToolbox) -> None:
    saved = await toolbox.store_memory("bye", "temp")
    assert (await toolbox.delete_memory(saved.key)).deleted is True
    with pytest.raises(MemoryToolError, match="no memory with key"):
        await toolbox.retrieve_memory(saved.key)


async def test_stats_count_by_type(store: MemoryStore, user_id: str) -> None:
    toolbox = MemoryToolbox(store, user_id)
    await toolbox.store_memory("one two", "n1", "note")
    await toolbox.store_memory("three", "n2", "note")
    await toolbox.store_memory("four", "l1", "lesson")
    stats = await toolbox.memory_stats()
    assert stats.total_memories == 3
    assert stats.by_type["note"].count == 2 and stats.by_type["lesson"].count == 1
    assert stats.total_tokens == sum(s.tokens for s in stats.by_type.values()) > 0


def test_the_user_is_fixed_at_construction(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="user_id must not be empty"):
        MemoryToolbox(store, "  ")


async def test_a_costly_grep_is_a_tool_error_the_model_can_act_on(
    toolbox: MemoryToolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_GREP_TIMEOUT_SECONDS", "0.3")
    saved = await toolbox.store_memory("a" * 40 + "b", "line that makes (a|aa)+$ backtrack")
    with pytest.raises(MemoryToolError, match=r"too costly.*simpler pattern"):
        await toolbox.retrieve_memory(saved.key, grep=r"(a|aa)+$")


async def test_the_agent_corrects_a_fact_with_update_memory_and_the_change_is_audited(
    toolbox: MemoryToolbox, store: MemoryStore
) -> None:
    saved = await toolbox.store_memory("Lyon", "home city: Lyon", "user_fact")
    updated = await toolbox.update_memory(saved.key, content="Paris", description="home city: Paris")

    assert updated.version == 2 and "version 2" in updated.render()
    assert await store.retrieve(saved.key, user_id=toolbox.user_id) == "Paris"
    audit = await store.audit_log(user_id=toolbox.user_id, key=saved.key)
    assert [(e.action, e.actor, e.surface) for e in audit] == [
        ("update", "coder", "agent"),
        ("store", "coder", "agent"),
    ]
