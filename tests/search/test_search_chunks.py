"""Whole contents are searchable: long outputs are indexed chunk by chunk, and a hit says which lines matched."""

from __future__ import annotations

from agent_memory import MemoryStore

CMD = "command_output"


def build_log(lines: int, last: str) -> str:
    body = "".join(f"2026-10-12 03:{i // 60 % 60:02d}:{i % 60:02d} [INFO] step {i} compiled module-{i % 97}\n"
                   for i in range(1, lines))  # fmt: skip
    return body + last + "\n"


async def test_the_error_on_the_last_line_of_a_ten_thousand_line_log_is_found(store: MemoryStore, user_id: str) -> None:
    log = build_log(10_000, "FATAL: checksum mismatch for artifact libgeo-4.2.jar")
    key = await store.store(log, user_id=user_id, description="nightly build", memory_type=CMD)

    hits = await store.search("checksum mismatch libgeo", user_id=user_id)

    assert [h.memory_key for h in hits] == [key]
    assert hits[0].matched_lines is not None
    start, end = (int(n) for n in hits[0].matched_lines.split("-"))
    assert start <= 10_000 <= end and end - start < 100
    shown = await store.retrieve(key, user_id=user_id, lines=hits[0].matched_lines)
    assert "FATAL: checksum mismatch for artifact libgeo-4.2.jar" in shown


async def test_a_hit_in_the_middle_of_a_long_output_names_its_lines(store: MemoryStore, user_id: str) -> None:
    lines = [f"row {i}: ok" for i in range(1, 5001)]
    lines[2999] = "row 3000: ERROR disk quota exceeded for /srv/uploads"
    key = await store.store("\n".join(lines), user_id=user_id, description="upload sweep", memory_type=CMD)

    [hit] = await store.search("disk quota exceeded", user_id=user_id)

    assert hit.memory_key == key and hit.matched_lines is not None
    start, end = (int(n) for n in hit.matched_lines.split("-"))
    assert start <= 3000 <= end
    assert hit.why is not None and hit.why["fts"]["lines"] == hit.matched_lines


async def test_updating_a_long_content_reindexes_its_chunks(store: MemoryStore, user_id: str) -> None:
    key = await store.store(build_log(3000, "ERROR: quasar overflow"), user_id=user_id, memory_type=CMD)
    await store.update(key, user_id=user_id, content=build_log(3000, "ERROR: nebula underflow"))

    assert await store.search("quasar overflow", user_id=user_id) == []
    assert [h.memory_key for h in await store.search("nebula underflow", user_id=user_id)] == [key]


async def test_another_users_long_output_is_never_found(store: MemoryStore, user_id: str, other_user_id: str) -> None:
    await store.store(build_log(4000, "ERROR: zeppelin mooring failed"), user_id=other_user_id, memory_type=CMD)

    assert await store.search("zeppelin mooring failed", user_id=user_id) == []
    assert len(await store.search("zeppelin mooring failed", user_id=other_user_id)) == 1


async def test_a_retracted_long_output_is_not_found_through_its_chunks(store: MemoryStore, user_id: str) -> None:
    key = await store.store(build_log(2000, "ERROR: gondola cable snapped"), user_id=user_id, memory_type=CMD)
    await store.retract(key, user_id=user_id, reason="wrong host")

    assert await store.search("gondola cable snapped", user_id=user_id) == []
