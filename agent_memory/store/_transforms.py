"""Views of a big text an agent can ask for: head, tail, a line range, grep with context.

Lines are split on ``\\n`` only, and each returned line keeps its own ending (``\\r\\n`` stays ``\\r\\n``),
so ``head(n)`` of a text is an exact prefix of it. ``grep`` prints ``N:line`` for matches and ``N-line``
for context lines, with ``--`` between separate groups, like ``grep -n``.

Example:
    >>> from agent_memory.store import apply_transforms
    >>> text = "a\\nb\\nerror: x\\nc\\n"
    >>> apply_transforms(text, head=2)
    'a\\nb\\n'
    >>> apply_transforms(text, grep="error", context=1)
    '2-b\\n3:error: x\\n4-c'
"""

from __future__ import annotations

import asyncio
import importlib
import re
import time
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar, Unpack

import regex

from ..config import get_settings
from ..errors import PatternTooCostly
from ._slots import PerUserSlots

MAX_GREP_CONTEXT = 100
T = TypeVar("T")


class ContentView(TypedDict, total=False):
    """Which part of a text to return instead of all of it (the options of :func:`apply_transforms`)."""

    head: int | None
    tail: int | None
    lines: str | tuple[int, int] | None
    grep: str | None
    context: int
    ignore_case: bool
    max_matches: int | None


def _check_option_names(view: ContentView) -> None:
    unknown = sorted(set(view) - set(ContentView.__annotations__))
    if unknown:
        raise TypeError(f"unexpected view option(s): {', '.join(unknown)}")


def check_view(view: ContentView) -> None:
    """Refuse unknown options and a bad grep pattern up front (before any database work)."""
    _check_option_names(view)
    grep = view.get("grep")
    if grep is not None:
        compile_pattern(grep, view.get("ignore_case", False))


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` with their ``\\n`` kept; ``''.join(split_lines(t)) == t``."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def parse_line_range(spec: str | tuple[int, int]) -> tuple[int, int]:
    """``"10-20"``, ``"10:20"``, ``"10-"`` or ``(10, 20)`` -> 1-based inclusive ``(start, end)``."""
    if isinstance(spec, tuple):
        start, end = spec
    else:
        match = re.fullmatch(r"\s*(\d{1,18})\s*[-:]\s*(\d{0,18})\s*", spec)
        if not match:
            raise ValueError(f"line range {spec!r} is not START-END (for example 100-200)")
        start = int(match[1])
        end = int(match[2]) if match[2] else 2**62
    if start < 1 or end < start:
        raise ValueError(f"line range {start}-{end} is invalid: lines are numbered from 1 and END >= START")
    return start, end


def compile_pattern(pattern: str, ignore_case: bool = False) -> regex.Pattern[str]:
    """Python ``re`` syntax, compiled by the ``regex`` engine, whose matches can be stopped by a time limit.

    Compiling cannot be stopped, and the engine writes counted repeats out in full: ``((a{100}){100}){1000}``
    (21 characters) took 3 s and 2.8 GB. Patterns whose repeats would write out more than
    ``MAX_PATTERN_EXPANSION`` items are refused before compiling.
    """
    if len(pattern) > 2000:
        raise ValueError("grep pattern is longer than 2000 characters")
    if pattern_expansion(pattern) > MAX_PATTERN_EXPANSION:
        raise PatternTooCostly(
            f"grep pattern {pattern[:80]!r} is too costly: its counted repeats multiply to more than "
            f"{MAX_PATTERN_EXPANSION:,} items; use smaller counts (or + and *)"
        )
    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0, cache_pattern=False)
    except regex.error as exc:
        raise ValueError(f"invalid grep regular expression {pattern!r}: {exc}") from exc


MAX_PATTERN_EXPANSION = 100_000  # compiles in ~0.04 s
# Python's own regular-expression parser (untyped, internal; the deprecated sre_parse is its public alias).
re_parser: Any = importlib.import_module("re._parser")
re_constants: Any = importlib.import_module("re._constants")
_REPEATS = {re_constants.MAX_REPEAT, re_constants.MIN_REPEAT, re_constants.POSSESSIVE_REPEAT}
_COUNTS_RE = re.compile(r"\{(\d+)(?:,\d*)?\}")


def pattern_expansion(pattern: str) -> int:
    """How many items the pattern's counted repeats write out (each repeat its minimum count times its body)."""
    try:
        parsed = re_parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        # Syntax only ``regex`` knows (``\p{L}``): the product of every minimum count bounds it from above.
        product = 1
        for count in _COUNTS_RE.findall(pattern):
            product *= max(1, int(count))
            if product > MAX_PATTERN_EXPANSION:
                break
        return product
    return _items(list(parsed))


def _items(nodes: list[tuple[Any, Any]]) -> int:
    total = 0
    for op, arg in nodes:
        if op in _REPEATS:
            total += max(1, arg[0]) * _items(list(arg[2]))
        elif op is re_constants.SUBPATTERN:
            total += _items(list(arg[-1]))
        elif op is re_constants.BRANCH:
            total += sum(_items(list(branch)) for branch in arg[1])
        elif op in (re_constants.ASSERT, re_constants.ASSERT_NOT):
            total += _items(list(arg[1]))
        elif op is re_constants.ATOMIC_GROUP:
            total += _items(list(arg))
        elif op is re_constants.GROUPREF_EXISTS:
            total += _items(list(arg[1])) + (_items(list(arg[2])) if arg[2] else 0)
        else:
            total += 1
        if total > MAX_PATTERN_EXPANSION:
            return total
    return total


def _matching_indexes(numbered: list[tuple[int, str]], pattern: regex.Pattern[str], timeout: float) -> list[int]:
    """Indexes of the lines ``pattern`` matches, stopping the whole scan once ``timeout`` seconds have passed.

    A backtracking pattern such as ``(a+)+$`` takes time exponential in the line's length; ``regex`` checks the
    limit inside the match and releases the GIL meanwhile (``concurrent``), so other requests keep being served.
    """
    deadline = time.monotonic() + timeout
    matching: list[int] = []
    for i, (_, line) in enumerate(numbered):
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            if pattern.search(line.rstrip("\r\n"), timeout=left, concurrent=True):
                matching.append(i)
        except TimeoutError:
            raise PatternTooCostly(
                f"grep pattern {pattern.pattern!r} is too costly: stopped after {timeout:g} s at line "
                f"{numbered[i][0]} of {len(numbered)}. Use a simpler pattern (nested repetition such as (a+)+ "
                "backtracks exponentially) or narrow the search with a line range; the limit is "
                "AGENT_MEMORY_GREP_TIMEOUT_SECONDS."
            ) from None
    return matching


def grep_lines(
    numbered: list[tuple[int, str]],
    pattern: regex.Pattern[str],
    context: int = 0,
    max_matches: int | None = None,
    timeout: float | None = None,
) -> str:
    """Matching lines with ``context`` lines around them, numbered like ``grep -n``.

    ``timeout``: seconds the whole scan may take (default ``AGENT_MEMORY_GREP_TIMEOUT_SECONDS``), after which
    :class:`~agent_memory.errors.PatternTooCostly` is raised.
    """
    if context < 0 or context > MAX_GREP_CONTEXT:
        raise ValueError(f"grep context must be between 0 and {MAX_GREP_CONTEXT}")
    limit = timeout if timeout is not None else get_settings().grep_timeout_seconds
    matching = _matching_indexes(numbered, pattern, limit)
    hits = matching[:max_matches] if max_matches is not None else matching
    is_match = set(matching)
    out: list[str] = []
    last_printed = -1
    for i in hits:
        lo, hi = max(0, i - context), min(len(numbered) - 1, i + context)
        if out and lo > last_printed + 1:
            out.append("--")
        for j in range(max(lo, last_printed + 1), hi + 1):
            number, line = numbered[j]
            out.append(f"{number}{':' if j in is_match else '-'}{line.rstrip(chr(13) + chr(10))}")
        last_printed = max(last_printed, hi)
    return "\n".join(out)


def apply_transforms(text: str, **view: Unpack[ContentView]) -> str:
    """Apply, in this order: ``lines`` range, ``grep``, then ``head`` / ``tail``. No option: ``text`` itself."""
    _check_option_names(view)
    head, tail, lines, grep = view.get("head"), view.get("tail"), view.get("lines"), view.get("grep")
    context, ignore_case, max_matches = view.get("context", 0), view.get("ignore_case", False), view.get("max_matches")
    if head is None and tail is None and lines is None and grep is None:
        return text
    for name, value in (("head", head), ("tail", tail), ("max_matches", max_matches)):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a non-negative integer")
    all_lines = split_lines(text)
    numbered = list(enumerate(all_lines, start=1))
    if lines is not None:
        start, end = parse_line_range(lines)
        numbered = numbered[start - 1 : end]
    if grep is not None:
        result = grep_lines(numbered, compile_pattern(grep, ignore_case), context, max_matches)
        result_lines = split_lines(result)
        if head is not None:
            result_lines = result_lines[:head]
        if tail is not None:
            result_lines = result_lines[-tail:] if tail else []
        return "".join(result_lines)
    if head is not None:
        numbered = numbered[:head]
    if tail is not None:
        numbered = numbered[-tail:] if tail else []
    return "".join(line for _, line in numbered)


_grep_slots = PerUserSlots(1)


async def grep_off_loop(user_id: str, work: Callable[[], T]) -> T:
    """Run ``work`` (a grep) in a thread, one at a time per user.

    Each grep is bounded by its time limit, but a user's parallel requests could still take every core; queued
    one behind the other, a user's costly patterns cost that user time, not other users.
    """
    async with _grep_slots.hold(user_id):
        return await asyncio.to_thread(work)
