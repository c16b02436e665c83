"""How many chat sessions one user may hold at once: ``AGENT_MEMORY_UI_MAX_SESSIONS_PER_USER`` (default 20).

Every chat session (a browser tab, or any socket a script opens with the user's cookie) builds its own agent
team, which holds memory until the session ends. Without a bound, one user could open sockets until the UI
process runs out of memory. A session takes a slot before its team is built and gives it back when it ends (the
socket closes); a session beyond the limit gets no team and says so in its chat.

Chainlit also keeps a closed socket's session for an hour (``session_timeout``), so that a reconnect finds it:
~85 KB each, so a script opening and closing sockets in a loop grew the UI without bound. :class:`ClosedSessions`
keeps that for as many closed sessions per user as the limit above; the sessions a user closes beyond it are
ended at once (a reconnect then starts a new session on the same thread).

Example:
    >>> slots = ChatSlots(per_user=1)
    >>> slots.take("alice"), slots.take("alice"), slots.take("bob")
    (True, False, True)
    >>> slots.give_back("alice"); slots.take("alice")
    True
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping

MAX_SESSIONS_ENV = "AGENT_MEMORY_UI_MAX_SESSIONS_PER_USER"
DEFAULT_MAX_SESSIONS = 20


class ChatSlots:
    """Counts of the chat sessions each user holds in this process (one process serves the UI)."""

    def __init__(self, per_user: int = DEFAULT_MAX_SESSIONS) -> None:
        if per_user < 1:
            raise ValueError(f"{MAX_SESSIONS_ENV} must be >= 1")
        self.per_user = per_user
        self._held: Counter[str] = Counter()

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ChatSlots:
        raw = environ.get(MAX_SESSIONS_ENV, "").strip() or str(DEFAULT_MAX_SESSIONS)
        try:
            return cls(int(raw))
        except ValueError:
            raise ValueError(f"{MAX_SESSIONS_ENV}={raw!r}: give a whole number >= 1") from None

    def take(self, user: str) -> bool:
        """Hold one more session for ``user``; False (nothing held) when they hold the limit already."""
        if self._held[user] >= self.per_user:
            return False
        self._held[user] += 1
        return True

    def give_back(self, user: str) -> None:
        self._held[user] -= 1
        if self._held[user] <= 0:
            del self._held[user]

    def held(self, user: str) -> int:
        return self._held[user]

    def refusal(self) -> str:
        """What a session beyond the limit says in its chat (markdown)."""
        return (
            f"**This chat is not started: you have {self.per_user} chat sessions open already**, the most one "
            "user may have at once.\n\nClose another agent-memory tab or window, then send a message here to "
            f"start this chat. (The limit is `{MAX_SESSIONS_ENV}`.)"
        )


class ClosedSessions:
    """The closed chat sessions Chainlit keeps for a reconnect, per user, up to ``per_user``.

    Example:
        >>> kept = ClosedSessions(per_user=1)
        >>> kept.keep("alice", "s1", still_kept=lambda _: True), kept.keep("alice", "s2", still_kept=lambda _: True)
        (True, False)
    """

    def __init__(self, per_user: int = DEFAULT_MAX_SESSIONS) -> None:
        self.per_user = per_user
        self._kept: dict[str, OrderedDict[str, None]] = {}

    def keep(self, user: str, session_id: str, *, still_kept: Callable[[str], bool]) -> bool:
        """Whether the session ``user`` just closed may be kept; ``still_kept(id)``: is an earlier one still kept
        closed (Chainlit ends them after its timeout; a reconnect reopens one)."""
        kept = self._kept.setdefault(user, OrderedDict())
        for earlier in [sid for sid in kept if sid == session_id or not still_kept(sid)]:
            del kept[earlier]
        if len(kept) >= self.per_user:
            return False
        kept[session_id] = None
        return True
