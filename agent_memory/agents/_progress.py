"""Live progress of a running code block: the tail of its output and the time so far, a few times a second.

The executor feeds every chunk of output to an :class:`OutputTail` as it arrives; :func:`while_running` turns the
tail into :class:`~agent_memory.agents.CodeProgressEvent` s while the run is under way, so the chat UI and the
terminal chat show the running step with its output instead of a pulsing dot. The full output is still kept
exactly by the executor; the tail is only a view.

Example:
    >>> tail = OutputTail(max_lines=2)
    >>> tail.feed(b"one\\ntwo\\nthree\\n")
    >>> tail.text(), tail.total
    ('two\\nthree\\n', 14)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from autogen_core.code_executor import CodeResult

from ._events import CodeProgressEvent

DEFAULT_INTERVAL_S = 0.5  # at most two updates a second per run: live, and cheap for the UI's websocket
_KEEP_BYTES = 16 * 1024
_MAX_TAIL_CHARS = 4000


class OutputTail:
    """The last ``max_lines`` lines of a byte stream (kept from its last 16 KB), and how many bytes it had."""

    def __init__(self, max_lines: int = 20) -> None:
        self.max_lines = max_lines
        self.total = 0
        self.changed = False
        self._buffer = bytearray()
        self._mirrored: str | None = None

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._buffer.extend(chunk)
        if len(self._buffer) > 2 * _KEEP_BYTES:
            del self._buffer[:-_KEEP_BYTES]
        self.changed = True

    def mirror(self, total: int, text: str) -> None:
        """Show what another tail reported (a run on an executor worker sends its tail, not its bytes)."""
        self.total = total
        self._mirrored = text
        self.changed = True

    def text(self) -> str:
        if self._mirrored is not None:
            return self._mirrored
        decoded = bytes(self._buffer[-_KEEP_BYTES:]).decode("utf-8", errors="replace").replace("\r\n", "\n")
        lines = [line.rsplit("\r", 1)[-1] for line in decoded.split("\n")]  # a progress bar shows its last state
        tail = (
            "\n".join(lines[-(self.max_lines + 1) :]) if decoded.endswith("\n") else "\n".join(lines[-self.max_lines :])
        )
        return tail[-_MAX_TAIL_CHARS:]


@runtime_checkable
class LiveOutput(Protocol):
    """An executor that feeds its output, as it comes, to the tail it is given (local or on a worker)."""

    output_tail: OutputTail | None


async def while_running(
    run: asyncio.Future[Any],
    tail: OutputTail,
    *,
    source: str,
    languages: list[str],
    interval_s: float = DEFAULT_INTERVAL_S,
) -> AsyncIterator[CodeProgressEvent]:
    """Progress events every ``interval_s`` until ``run`` is done (the first after one interval, so a block that
    finishes at once shows no progress at all)."""
    started = time.monotonic()
    while True:
        done, _ = await asyncio.wait({run}, timeout=interval_s)
        if done:
            return
        tail.changed = False
        yield CodeProgressEvent(
            source=source, elapsed_s=round(time.monotonic() - started, 1), output_bytes=tail.total, tail=tail.text(),
            languages=languages,
        )  # fmt: skip


def status_line(result: CodeResult) -> str:
    """One line the model can act on: exit status, time, timeout, truncation."""
    duration = getattr(result, "duration_s", None)
    took = f" in {duration:.2f}s" if isinstance(duration, float) else ""
    if getattr(result, "timed_out", False):
        text = f"TIMED OUT{took}: the process group was killed (exit code {result.exit_code})."
    elif result.exit_code == 0:
        text = f"Exit code 0 (success){took}."
    else:
        text = f"FAILED with exit code {result.exit_code}{took}."
    if getattr(result, "truncated", False):
        text += f" Output was capped: {getattr(result, 'output_bytes', 0)} bytes produced, the rest discarded."
    if getattr(result, "not_utf8", False):
        text += " The output is not valid UTF-8: undecodable bytes are shown as \\xNN escapes."
    return text
