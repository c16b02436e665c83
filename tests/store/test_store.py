"""MemoryStore: exact storage, user isolation, transforms, listing, deletion, bad input."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory import MemoryItem, MemoryNotFound, MemoryStore
from agent_memory.placeholders import is_valid_key
from agent_memory.tokens import count_tokens

EXACT_CASES = {
    "plain": "hello world",
    "nul": "before\x00after\x00",
    "nul-and-backslashes": "a\\0b\x00c\\\\0\\\x00\\",
    "crlf": "line 1\r\nline 2\r\n\r\n",
    "lone-cr": "progress 10%\rprogress 100%\r",
    "emoji-and-cjk": "✅ build ok 🚀 — 日本語 ½ \u200b zero-width",
    "control-chars": "\x01\x02\x1b[31mred\x1b[0m\x7f\t",
    "trailing-whitespace": "  \n\t\n  ",
    "unicode-line-separators": "a\u2028b\u2029c\x0bd\x0ce\x1cf",
    "empty": "",
}


@pytest.mark.parametrize("name", list(EXACT_CASES))
async def test_content_round_trips_exactly(store: MemoryStore, user_id: str, name: str) -> None:
    content = EXACT_CASES[name]
    key = await store.store(content, user_id=user_id, description=name)
    assert await store.retrieve(key, user_id=user_id) == content


async def test_twenty_megabyte_output_with_nul_bytes_round_trips(store: MemoryStore, user_id: str) -> None:
    line = "2026-11-22T10:00:00 INFO worker processed batch \x00 id=%06d status=ok\r\n"
    content = "".join(line % i for i in range(300_000))
    assert len(content.encode()) > 20_000_000
    key = await store.store(content, user_id=user_id, memory_type="command_output")
    back = await store.retrieve(key, user_id=user_id)
    assert hashlib.sha256(back.encode()).hexdigest() == hashlib.sha256(content.encode()).hexdigest()
    item = await store.get(key, user_id=user_id)
    assert item.content_sha256 == hashlib.sha256(content.encode()).hexdigest()
    assert item.char_count == len(content)


async def test_lone_surrogate_is_refused_with_clear_error(store: MemoryStore, user_id: str) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        await store.store("ok \ud800 broken", user_id=user_id)
    assert await store.list(user_id=user_id) == []


async def test_non_string_content_is_refused(store: MemoryStore, user_id: str) -> None:
    with pytest.raises(ValueError, match="must be a str"):
        await store.store(b"bytes", user_id=user_id)  # type: ignore[arg-type]


async def test_store_returns_a_placeholder_safe_key_prefixed_by_type(store: MemoryStore, user_id: str) -> None:
    key = await store.store("x", user_id=user_id, memory_type="command_output")
    assert key.startswith("cmd_") and is_valid_key(key)


async def test_store_records_token_count_with_tiktoken(store: MemoryStore, user_id: str) -> None:
    content = "The quick brown fox jumps over the lazy dog. " * 20
    key = await store.store(content, user_id=user_id)
    assert (await store.get(key, user_id=user_id)).token_count == count_tokens(content)


async def test_metadata_and_ids_are_kept(store: MemoryStore, user_id: str) -> None:
    meta = {"command": "npm install", "exit_code": 1, "nested": {"ok": [1, 2.5, None, True]}}
    key = await store.store("log", user_id=user_id, metadata=meta, agent_id="coder", thread_id="t-1")
    item = await store.get(key, user_id=user_id)
    assert (item.metadata, item.agent_id, item.thread_id) == (meta, "coder", "t-1")


@pytest.mark.parametrize(
    "metadata",
    [{"x": "nul\x00inside"}, {"x": float("nan")}, {"x": object()}, ["not", "a", "dict"]],
)
async def test_metadata_that_jsonb_cannot_hold_is_refused(store: MemoryStore, user_id: str, metadata: object) -> None:
    with pytest.raises(ValueError, match="metadata"):
        await store.store("x", user_id=user_id, metadata=metadata)  # type: ignore[arg-type]


@pytest.mark.parametrize("number", [1e16, 1.7976931348623157e308, -0.0])
async def test_a_metadata_float_that_would_come_back_altered_is_refused(
    store: MemoryStore, user_id: str, number: float
) -> None:
    # JSONB keeps the value, not the float type: 1e16 would come back as the int 10000000000000000, -0.0 as 0.0.
    with pytest.raises(ValueError, match=r"would come back altered.*store it as a string"):
        await store.store("x", user_id=user_id, metadata={"n": number})


async def test_floats_that_round_trip_are_kept_exactly(store: MemoryStore, user_id: str) -> None:
    meta = {"small": 1.5e-07, "big": 1e15, "third": 1 / 3, "zero": 0.0}
    key = await store.store("x", user_id=user_id, metadata=meta)
    assert (await store.get(key, user_id=user_id)).metadata == meta


async def test_metadata_nested_past_the_limit_is_refused_with_a_value_error(store: MemoryStore, user_id: str) -> None:
    deep: dict[str, object] = {}
    for _ in range(2000):  # json.dumps alone would raise RecursionError
        deep = {"a": deep}
    with pytest.raises(ValueError, match="nested more than 64 levels"):
        await store.store("x", user_id=user_id, metadata=deep)


# ------------------------------------------------------------------------------------------ isolation


async def test_key_of_another_user_is_not_found(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    key = await store.store("alice's secret", user_id=user_id)
    await store.store("bob's note", user_id=other_user_id)
    with pytest.raises(MemoryNotFound) as foreign:
        await store.retrieve(key, user_id=other_user_id)
    with pytest.raises(MemoryNotFound) as missing:
        await store.retrieve("note_000000000000", user_id=other_user_id)
    assert str(foreign.value).replace(key, "K") == str(missing.value).replace("note_000000000000", "K")


async def test_another_user_cannot_get_delete_search_or_list(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    key = await store.store("kubernetes cluster password hunter2", user_id=user_id, description="cluster creds")
    await store.store("unrelated", user_id=other_user_id)
    with pytest.raises(MemoryNotFound):
        await store.get(key, user_id=other_user_id)
    with pytest.raises(MemoryNotFound):
        await store.delete(key, user_id=other_user_id)
    assert await store.search("kubernetes cluster password", user_id=other_user_id) == []
    assert key not in [i.memory_key for i in await store.list(user_id=other_user_id)]
    assert await store.retrieve(key, user_id=user_id) == "kubernetes cluster password hunter2"


async def test_same_key_text_under_two_users_stays_separate(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    a = await store.store("A", user_id=user_id)
    b = await store.store("B", user_id=other_user_id)
    assert (await store.retrieve(a, user_id=user_id), await store.retrieve(b, user_id=other_user_id)) == ("A", "B")


@pytest.mark.parametrize(
    "key",
    ["'; DROP TABLE agent_memories; --", "%", "_", "note_%", "x" * 10_000, "ключ", "key with spaces", "", "\x00"],
)
async def test_hostile_keys_are_simply_not_found(store: MemoryStore, user_id: str, key: str) -> None:
    await store.store("still here", user_id=user_id)
    with pytest.raises(MemoryNotFound):
        await store.retrieve(key, user_id=user_id)
    with pytest.raises(MemoryNotFound):
        await store.delete(key, user_id=user_id)
    assert len(await store.list(user_id=user_id)) == 1


@pytest.mark.parametrize("bad_user", ["", "   ", "u" * 10_000, "nul\x00user", "\udc80"])
async def test_hostile_user_ids_get_a_clean_error(store: MemoryStore, bad_user: str) -> None:
    with pytest.raises(ValueError, match="user_id"):
        await store.store("x", user_id=bad_user)
    with pytest.raises(ValueError, match="user_id"):
        await store.search("x", user_id=bad_user)


async def test_sql_like_user_ids_are_just_names(store: MemoryStore) -> None:
    weird = "' OR '1'='1"
    key = await store.store("mine", user_id=weird)
    assert await store.retrieve(key, user_id=weird) == "mine"
    with pytest.raises(MemoryNotFound):
        await store.retrieve(key, user_id="%")
    await store.forget_user(weird)


async def test_concurrent_first_stores_of_a_new_user_all_succeed(store: MemoryStore, user_id: str) -> None:
    keys = await asyncio.gather(*(store.store(f"item {i}", user_id=user_id) for i in range(20)))
    assert len(set(keys)) == 20
    assert len(await store.list(user_id=user_id)) == 20


# ------------------------------------------------------------------------------------------ transforms


LOG = "".join(f"line {i}\n" for i in range(1, 101)).replace("line 42\n", "line 42 ERROR: disk full\n")


async def test_retrieve_head_and_tail(store: MemoryStore, user_id: str) -> None:
    key = await store.store(LOG, user_id=user_id)
    assert await store.retrieve(key, user_id=user_id, head=2) == "line 1\nline 2\n"
    assert await store.retrieve(key, user_id=user_id, tail=2) == "line 99\nline 100\n"


async def test_retrieve_line_range(store: MemoryStore, user_id: str) -> None:
    key = await store.store(LOG, user_id=user_id)
    assert await store.retrieve(key, user_id=user_id, lines="10-12") == "line 10\nline 11\nline 12\n"


async def test_a_line_number_of_thousands_of_digits_is_a_range_error(store: MemoryStore, user_id: str) -> None:
    key = await store.store(LOG, user_id=user_id)
    with pytest.raises(ValueError, match="is not START-END"):  # not Python's "Exceeds the limit (4300 digits)"
        await store.retrieve(key, user_id=user_id, lines="1-" + "9" * 5000)


async def test_retrieve_grep_with_context(store: MemoryStore, user_id: str) -> None:
    key = await store.store(LOG, user_id=user_id)
    got = await store.retrieve(key, user_id=user_id, grep=r"ERROR: \w+", context=1)
    assert got == "41-line 41\n42:line 42 ERROR: disk full\n43-line 43"


async def test_invalid_regex_is_a_value_error(store: MemoryStore, user_id: str) -> None:
    key = await store.store(LOG, user_id=user_id)
    with pytest.raises(ValueError, match="invalid grep regular expression"):
        await store.retrieve(key, user_id=user_id, grep="([unclosed")


async def test_retrieve_counts_accesses(store: MemoryStore, user_id: str) -> None:
    key = await store.store("x", user_id=user_id)
    await store.retrieve(key, user_id=user_id)
    await store.retrieve(key, user_id=user_id, head=1)
    item = await store.get(key, user_id=user_id)
    assert item.access_count == 2 and item.last_accessed_at is not None


# ------------------------------------------------------------------------------------------ search/list


async def test_search_finds_by_words_best_first(store: MemoryStore, user_id: str) -> None:
    await store.store("pip freeze output: numpy pandas", user_id=user_id, description="python packages")
    target = await store.store(
        "npm ERR! code ERESOLVE\nnpm ERR! unable to resolve dependency tree",
        user_id=user_id, description="npm install failure", memory_type="command_output",
    )  # fmt: skip
    results = await store.search("npm install dependency error", user_id=user_id)
    assert results and results[0].memory_key == target
    assert isinstance(results[0], MemoryItem) and results[0].score is not None and results[0].score > 0


async def test_search_finds_identifiers(store: MemoryStore, user_id: str) -> None:
    await store.store("deploy finished", user_id=user_id, description="deploy log")
    target = await store.store("request failed with trace id 9f8e7d6c5b4a3921", user_id=user_id)
    results = await store.search("9f8e7d6c5b4a3921", user_id=user_id)
    assert results[0].memory_key == target


async def test_search_filters_by_type(store: MemoryStore, user_id: str) -> None:
    await store.store("prefers postgres database", user_id=user_id, memory_type="user_preference")
    await store.store("postgres database log", user_id=user_id, memory_type="command_output")
    results = await store.search("postgres database", user_id=user_id, memory_type="user_preference")
    assert [r.memory_type for r in results] == ["user_preference"]


async def test_blank_query_returns_nothing(store: MemoryStore, user_id: str) -> None:
    await store.store("something", user_id=user_id)
    assert await store.search("   ", user_id=user_id) == []


@pytest.mark.parametrize("limit", [0, -1, 101, True])
async def test_search_limit_out_of_range_is_refused(store: MemoryStore, user_id: str, limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        await store.search("x", user_id=user_id, limit=limit)


async def test_list_is_newest_first_with_filters(store: MemoryStore, user_id: str) -> None:
    first = await store.store("a", user_id=user_id, memory_type="note", thread_id="t1")
    second = await store.store("b", user_id=user_id, memory_type="command_output", thread_id="t2")
    assert [i.memory_key for i in await store.list(user_id=user_id)] == [second, first]
    assert [i.memory_key for i in await store.list(user_id=user_id, memory_type="note")] == [first]
    assert [i.memory_key for i in await store.list(user_id=user_id, thread_id="t2")] == [second]
    future = datetime.now(UTC) + timedelta(hours=1)
    assert await store.list(user_id=user_id, since=future) == []


async def test_stats_counts_by_type(store: MemoryStore, user_id: str) -> None:
    await store.store("one two", user_id=user_id, memory_type="note")
    await store.store("three", user_id=user_id, memory_type="note")
    await store.store("four", user_id=user_id, memory_type="lesson")
    stats = await store.stats(user_id=user_id)
    assert stats.total_memories == 3
    assert stats.by_type["note"]["count"] == 2 and stats.by_type["lesson"]["count"] == 1


# ------------------------------------------------------------------------------------------ delete/forget


async def test_delete_removes_only_that_memory(store: MemoryStore, user_id: str) -> None:
    gone = await store.store("a", user_id=user_id)
    kept = await store.store("b", user_id=user_id)
    await store.delete(gone, user_id=user_id)
    with pytest.raises(MemoryNotFound):
        await store.retrieve(gone, user_id=user_id)
    assert await store.retrieve(kept, user_id=user_id) == "b"


async def test_forget_user_deletes_everything_of_that_user_only(
    store: MemoryStore, user_id: str, other_user_id: str
) -> None:
    await store.store("a", user_id=user_id)
    await store.store("b", user_id=user_id)
    theirs = await store.store("c", user_id=other_user_id)
    assert await store.forget_user(user_id) == 2
    assert await store.list(user_id=user_id) == []
    assert await store.retrieve(theirs, user_id=other_user_id) == "c"


async def test_store_after_forget_user_starts_fresh(store: MemoryStore, user_id: str) -> None:
    await store.store("before", user_id=user_id)
    await store.forget_user(user_id)
    key = await store.store("after", user_id=user_id)
    assert [i.memory_key for i in await store.list(user_id=user_id)] == [key]
