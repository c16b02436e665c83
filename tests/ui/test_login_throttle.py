"""The login throttle's counting, on a clock the test moves (the HTTP behaviour is in test_ui_api.py)."""

from __future__ import annotations

import pytest

from chainlit_app.login_throttle import BUSY_RETRY_SECONDS, LoginThrottle
from chainlit_app.sessions import session_lifetime_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_wait_ends_when_the_oldest_failure_leaves_the_window() -> None:
    clock = Clock()
    throttle = LoginThrottle(max_failures=3, window_s=60, clock=clock)
    for step in range(3):
        clock.now = 1000.0 + step * 10
        throttle.record_failure("alice", "10.0.0.1")
    assert throttle.retry_after("alice", "10.0.0.1") == 40  # first failure at 1000 leaves at 1060; now 1020
    clock.now = 1060.5
    assert throttle.retry_after("alice", "10.0.0.1") == 0


def test_a_success_clears_the_account_but_not_the_address() -> None:
    throttle = LoginThrottle(max_failures=1, window_s=60, clock=Clock())
    for i in range(4):
        throttle.record_failure(f"user-{i}", "10.0.0.1")
    throttle.record_success("user-0", "10.0.0.9")
    assert throttle.retry_after("user-0", "10.0.0.9") == 0
    assert throttle.retry_after("someone-else", "10.0.0.1") > 0  # 4 failures = 4 x max_failures from one address


def test_failures_from_one_address_lock_the_account_only_from_there() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=60, clock=Clock())
    for _ in range(2):
        throttle.record_failure("alice", "10.0.0.66")
    assert throttle.retry_after("alice", "10.0.0.66") == 60
    assert throttle.retry_after("alice", "10.0.0.1") == 0


def test_failures_from_many_addresses_lock_the_account_everywhere_at_four_times_the_limit() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=60, clock=Clock())
    for i in range(7):
        throttle.record_failure("alice", f"10.0.1.{i}")
    assert throttle.retry_after("alice", "10.0.0.1") == 0
    throttle.record_failure("alice", "10.0.1.7")
    assert throttle.retry_after("alice", "10.0.0.1") == 60


def test_attempts_being_checked_count_against_the_limit() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=60, clock=Clock())
    assert throttle.reserve("alice", "10.0.0.1") == 0
    assert throttle.reserve("alice", "10.0.0.1") == 0
    assert throttle.reserve("alice", "10.0.0.1") == BUSY_RETRY_SECONDS  # nothing failed yet, but two are checked
    assert throttle.reserve("bob", "10.0.0.2") == 0  # others are not held up


def test_a_released_attempt_that_did_not_fail_gives_its_room_back() -> None:
    throttle = LoginThrottle(max_failures=1, window_s=60, clock=Clock())
    assert throttle.reserve("alice", "10.0.0.1") == 0
    throttle.release("alice", "10.0.0.1")
    assert throttle.reserve("alice", "10.0.0.1") == 0


def test_a_released_attempt_that_failed_stays_counted_for_the_window() -> None:
    throttle = LoginThrottle(max_failures=1, window_s=60, clock=Clock())
    assert throttle.reserve("alice", "10.0.0.1") == 0
    throttle.record_failure("alice", "10.0.0.1")
    throttle.release("alice", "10.0.0.1")
    assert throttle.reserve("alice", "10.0.0.1") == 60


@pytest.mark.parametrize("value", ["0", "-3", "soon", "99999"])
def test_a_bad_session_lifetime_is_refused_with_the_variable_named(value: str) -> None:
    with pytest.raises(ValueError, match="AGENT_MEMORY_UI_SESSION_HOURS"):
        session_lifetime_seconds({"AGENT_MEMORY_UI_SESSION_HOURS": value})
