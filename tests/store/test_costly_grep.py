"""A grep pattern that backtracks exponentially is stopped at its time limit and never stalls other requests."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent_memory import MemoryStore
from agent_memory.errors import PatternTooCostly
from agent_memory.store import apply_transforms, grep_off_loop

BOMB = r"(a|aa)+$"  # backtracks exponentially in every engine that backtracks
VICTIM_LINE = "a" * 40 + "b"  # Python's re needs hours for this line: the time grows ~1.6x with each 'a'


@pytest.fixture(autouse=True)
def short_grep_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_GREP_TIMEOUT_SECONDS", "0.5")


def test_a_backtracking_pattern_is_stopped_with_an_error_that_says_why() -> None:
    with pytest.raises(PatternTooCostly, match=r"too costly: stopped after 0.5 s at line 2 of 3.*simpler pattern"):
        apply_transforms(f"ok\n{VICTIM_LINE}\nok\n", grep=BOMB)


def test_the_error_is_a_value_error_like_any_bad_pattern() -> None:
    with pytest.raises(ValueError):
        apply_transforms(VICTIM_LINE, grep=BOMB)


def test_the_time_limit_is_for_the_whole_scan_not_per_line() -> None:
    many = "\n".join([VICTIM_LINE] * 50)
    with pytest.raises(PatternTooCostly, match="at line 1 of 50"):
        apply_transforms(many, grep=BOMB)


def test_the_nested_plus_from_the_report_answers_at_once() -> None:
    assert apply_transforms("a" * 25 + "b", grep=r"(a+)+$") == ""  # froze every user for seconds with re


def test_ordinary_patterns_keep_working() -> None:
    assert apply_transforms("a\nerror: x\nb\n", grep=r"err(or|no)\b", context=1) == "1-a\n2:error: x\n3-b"


async def test_a_costly_grep_through_the_store_raises_and_the_memory_is_intact(
    store: MemoryStore, user_id: str
) -> None:
    key = await store.store(VICTIM_LINE, user_id=user_id)
    with pytest.raises(PatternTooCostly):
        await store.retrieve(key, user_id=user_id, grep=BOMB)
    assert await store.retrieve(key, user_id=user_id) == VICTIM_LINE


async def test_other_requests_are_answered_while_a_costly_grep_runs(store: MemoryStore, user_id: str) -> None:
    bomb_key = await store.store(VICTIM_LINE, user_id=user_id)
    other_key = await store.store("another user's request", user_id=user_id + "-other")
    bomb = asyncio.create_task(store.retrieve(bomb_key, user_id=user_id, grep=BOMB))
    other = asyncio.create_task(store.retrieve(other_key, user_id=user_id + "-other", grep="request"))

    done, _ = await asyncio.wait({bomb, other}, return_when=asyncio.FIRST_COMPLETED)

    assert done == {other}  # with Python's re the match held the GIL and the event loop until it ended
    assert other.result() == "1:another user's request"
    with pytest.raises(PatternTooCostly):
        await bomb


async def test_a_users_greps_run_one_at_a_time_while_other_users_are_not_queued() -> None:
    loop = asyncio.get_running_loop()
    release = threading.Event()
    started: dict[str, asyncio.Event] = {name: asyncio.Event() for name in ("a1", "a2", "b")}

    def work(name: str) -> str:
        loop.call_soon_threadsafe(started[name].set)
        release.wait(30)
        return name

    a1 = asyncio.create_task(grep_off_loop("alice", lambda: work("a1")))
    await started["a1"].wait()
    a2 = asyncio.create_task(grep_off_loop("alice", lambda: work("a2")))
    b = asyncio.create_task(grep_off_loop("bob", lambda: work("b")))
    await started["b"].wait()  # bob's grep runs while alice's first one is still running

    assert not started["a2"].is_set()  # alice's second waits for her first
    release.set()
    assert await asyncio.gather(a1, a2, b) == ["a1", "a2", "b"]


@pytest.mark.parametrize("pattern", [r"((a{100}){100}){100}", r"(?:x{1000}){1000}", r"\p{L}{1000}(\p{N}{1000})"])
def test_a_pattern_whose_counted_repeats_multiply_past_the_limit_is_refused_before_compiling(pattern: str) -> None:
    # The engine writes counted repeats out when it compiles, which no time limit stops: ((a{100}){100}){1000}
    # (21 characters) took 3 s and 2.8 GB of the shared server.
    with pytest.raises(PatternTooCostly, match="counted repeats multiply"):
        apply_transforms("aaa", grep=pattern)


@pytest.mark.parametrize("pattern", [r"\d{1,3}(\.\d{1,3}){3}", r".{0,5000}ERROR", r"x{100000}", r"(?i)\p{L}{3}-\d{4}"])
def test_ordinary_counted_repeats_compile(pattern: str) -> None:
    assert apply_transforms("ip 10.0.0.1\nABC-1234\n", grep=pattern) is not None
