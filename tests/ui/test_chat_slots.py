"""The count of chat sessions each user holds (the end-to-end behaviour is in test_ui_limits.py)."""

from __future__ import annotations

import pytest

from chainlit_app.chat_slots import ChatSlots


def test_a_user_holds_at_most_the_limit_and_others_are_counted_apart() -> None:
    slots = ChatSlots(per_user=2)
    assert [slots.take("alice") for _ in range(3)] == [True, True, False]
    assert slots.take("bob")
    assert (slots.held("alice"), slots.held("bob")) == (2, 1)


def test_a_slot_given_back_can_be_taken_again() -> None:
    slots = ChatSlots(per_user=1)
    assert slots.take("alice")
    slots.give_back("alice")
    assert slots.held("alice") == 0
    assert slots.take("alice")


def test_the_limit_defaults_to_20() -> None:
    assert ChatSlots.from_env({}).per_user == 20


@pytest.mark.parametrize("value", ["0", "-1", "many", "2.5"])
def test_a_bad_limit_is_refused_with_the_variable_named(value: str) -> None:
    with pytest.raises(ValueError, match="AGENT_MEMORY_UI_MAX_SESSIONS_PER_USER"):
        ChatSlots.from_env({"AGENT_MEMORY_UI_MAX_SESSIONS_PER_USER": value})
