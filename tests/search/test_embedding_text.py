"""A long output's vector is made of its description, its distinct failure lines and its last lines.

The embedder reads only the first ~112 word pieces of a text, so a vector of the head of a 3,000-line log never
sees the error at line 2,417. These tests pin the recipe (pure function), the SQL that picks the lines, and the
search it makes possible: a buried error found by meaning, with no word in common with the question.
"""

from __future__ import annotations

import logging

import pytest

from agent_memory import MemoryStore
from agent_memory.search import _worker as worker
from agent_memory.search import embedding_text
from agent_memory.search._embedding_text import SALIENT_BUDGET, SALIENT_LINES_SQL, SCAN_CHARS

CMD = "command_output"


def info_log(lines: int) -> list[str]:
    return [
        f"2026-10-12 03:{i // 60 % 60:02d}:{i % 60:02d} [INFO] step {i} compiled module-{i % 97}" for i in range(lines)
    ]


def as_text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the recipe (pure)


def test_a_short_memory_is_embedded_whole() -> None:
    assert embedding_text("df -h", "/dev/sda1 100% /", "", 16, ["ERROR: never used"]) == "df -h\n/dev/sda1 100% /"


def test_a_long_output_is_embedded_as_description_failure_lines_and_last_lines() -> None:
    text = as_text([*info_log(3000), "build finished", "exit 1"])
    error = "java.lang.OutOfMemoryError: Java heap space"

    embedded = embedding_text("nightly build", text[:1500], text[-500:], len(text), [error])

    assert embedded.splitlines()[:2] == ["nightly build", error]
    assert embedded.rstrip().endswith("build finished\nexit 1")
    assert "step 0 compiled" not in embedded  # the head gives way to what went wrong


def test_a_long_output_without_failure_lines_keeps_head_and_tail() -> None:
    text = as_text(info_log(3000))

    embedded = embedding_text("nightly build", text[:1500], text[-500:], len(text), [])

    assert embedded.startswith("nightly build\n" + text[:100])
    assert embedded.endswith(text[-100:])


def test_failure_lines_are_cut_to_the_budget() -> None:
    lines = [f"ERROR {i}: " + "x" * 150 for i in range(40)]

    embedded = embedding_text("d", "h", "t", 10_000, lines)

    kept = [ln for ln in embedded.splitlines() if ln.startswith("ERROR")]
    assert 1 < len(kept) < 40
    assert sum(map(len, kept)) <= SALIENT_BUDGET


# ------------------------------------------------------------------ the lines PostgreSQL picks


async def _salient(store: MemoryStore, key: str) -> list[str]:
    row = await store.db.pool.fetchrow("SELECT id, user_id FROM agent_memories WHERE memory_key = $1", key)
    return list(await store.db.pool.fetchval(SALIENT_LINES_SQL, row["id"], row["user_id"]) or [])


async def test_the_buried_error_is_picked_from_a_long_output(store: MemoryStore, user_id: str) -> None:
    lines = info_log(3000)
    lines[2417] = "Exception in thread main java.lang.OutOfMemoryError: Java heap space"
    key = await store.store(as_text(lines), user_id=user_id, description="settlement batch", memory_type=CMD)

    assert await _salient(store, key) == [lines[2417]]


async def test_repeats_that_differ_only_in_numbers_count_once_and_strong_lines_come_first(
    store: MemoryStore, user_id: str
) -> None:
    lines = info_log(2000)
    for i in range(100, 1900, 10):
        lines[i] = f"03:{i % 60:02d} WARNING: retrying request {i} to 10.0.{i % 7}.1"
    lines[1950] = "03:59 ERROR: connection refused by 10.0.3.1:5432"
    lines[1960] = "03:59 ERROR: connection refused by 10.0.4.1:5432"
    key = await store.store(as_text(lines), user_id=user_id, description="sync job", memory_type=CMD)

    picked = await _salient(store, key)

    assert picked == [lines[1950], lines[100]]


async def test_carriage_returns_and_hex_free_words_are_kept_apart(store: MemoryStore, user_id: str) -> None:
    lines = info_log(2000)
    lines[500] = "ERROR: facade rejected the request\r"
    lines[900] = "ERROR: decade rejected the request\r"
    key = await store.store(as_text(lines), user_id=user_id, description="api", memory_type=CMD)

    assert await _salient(store, key) == ["ERROR: facade rejected the request", "ERROR: decade rejected the request"]


async def test_a_short_memory_has_no_salient_lines(store: MemoryStore, user_id: str) -> None:
    key = await store.store("ERROR: disk full", user_id=user_id, description="df", memory_type=CMD)

    assert await _salient(store, key) == []


async def test_the_tail_of_an_output_longer_than_the_scan_is_read_too(store: MemoryStore, user_id: str) -> None:
    lines = info_log(SCAN_CHARS // 60 + 2000)
    lines[-1] = "FATAL: checksum mismatch for libgeo-4.2.jar"
    text = as_text(lines)
    assert len(text) > SCAN_CHARS
    key = await store.store(text, user_id=user_id, description="huge build", memory_type=CMD)

    assert await _salient(store, key) == [lines[-1]]


async def test_a_line_cut_at_the_start_of_the_tail_is_not_a_line_of_its_own(store: MemoryStore, user_id: str) -> None:
    line = "ERROR: connection refused by the primary"
    text = (line + "\n") * (SCAN_CHARS // len(line) + 1000)
    key = await store.store(text, user_id=user_id, description="sync loop", memory_type=CMD)

    assert await _salient(store, key) == [line]


# ------------------------------------------------------------------ search by meaning finds a buried error


async def test_a_buried_error_is_found_by_meaning_without_a_shared_word(
    vector_store: MemoryStore, user_id: str
) -> None:
    # The stand-in model puts "storage exhausted" near "space ... left"; no word of the question is in any log.
    def log(error: str, head: str) -> str:
        lines = [head, *info_log(2500)]
        lines[2100] = error
        return as_text(lines)

    gold = await vector_store.store(
        log("write failed: No space left on device", "$ ./backup.sh --target /srv"),
        user_id=user_id, description="backup run", memory_type=CMD,
    )  # fmt: skip
    for n in range(3):  # other logs: a disk check in their first line, another failure deep inside
        await vector_store.store(
            log(f"ERROR: connection refused by 10.0.{n}.1", "$ df -h && ./sync.sh  # disk space check first"),
            user_id=user_id, description=f"sync run {n}", memory_type=CMD,
        )  # fmt: skip
    assert vector_store.embeddings is not None
    await vector_store.embeddings.flush()

    hits = await vector_store.search("storage exhausted", user_id=user_id)

    assert hits and hits[0].memory_key == gold
    assert hits[0].why is not None and set(hits[0].why) == {"dense"}


async def test_reindex_renews_the_vector_of_a_long_output_made_by_the_older_recipe(
    vector_store: MemoryStore, user_id: str
) -> None:
    lines = info_log(2500)
    lines[2100] = "write failed: No space left on device"
    long_key = await vector_store.store(as_text(lines), user_id=user_id, description="backup run", memory_type=CMD)
    await vector_store.store("added 212 packages in 4s", user_id=user_id, description="npm install", memory_type=CMD)
    assert vector_store.embeddings is not None
    await vector_store.embeddings.flush()
    # as a version before schema 12 left them: every vector of this user made by the head recipe
    await vector_store.db.pool.execute(
        """UPDATE agent_memory_embeddings e SET recipe = 1 FROM "User" u
           WHERE u.id = e.user_id AND u.identifier = $1""",
        user_id,
    )

    assert await vector_store.count_unembedded(user_id=user_id) == 1  # the short memory's text did not change
    report = await vector_store.reindex(user_id=user_id)

    assert report.embedded == 1 and await vector_store.count_unembedded(user_id=user_id) == 0
    hits = await vector_store.search("storage exhausted", user_id=user_id)
    assert hits and hits[0].memory_key == long_key


async def test_an_output_whose_lines_take_too_long_is_embedded_from_its_head(
    vector_store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(worker, "SALIENT_TIMEOUT_MS", 1)  # a million short lines take about a second
    slow = await vector_store.store("\n" * 1_000_000 + "ERROR: boom\n", user_id=user_id, description="empty lines",
                                    memory_type=CMD)  # fmt: skip
    normal = await vector_store.store("ERROR: disk full", user_id=user_id, description="df", memory_type=CMD)
    assert vector_store.embeddings is not None
    with caplog.at_level(logging.INFO, logger="agent_memory.search._worker"):
        await vector_store.embeddings.flush()

    assert await vector_store.count_unembedded(user_id=user_id) == 0  # both embedded: the batch did not fail
    assert any("took over 1 ms" in r.getMessage() for r in caplog.records)
    assert {h.memory_key for h in await vector_store.search("empty lines df", user_id=user_id)} >= {slow, normal}
