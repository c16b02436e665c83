"""Compact forms of big content: deterministic descriptions and excerpts, optional LLM summaries.

Everything here works without a model (deterministic compaction, no LLM call): a one-line description built from
the tool name, its arguments, the first meaningful line and the size; an excerpt with the first and last
lines, the lines that mention errors or warnings (with their line numbers) and the exit status. When a
``model_client`` is configured, :func:`llm_description` may replace the description, and falls back to the
deterministic one on any error or timeout.

Example:
    >>> from agent_memory.context import describe, excerpt, salient_identifiers
    >>> log = "collecting...\\nok 1\\nERROR test_db.py::test_connect refused\\nexit code: 1\\n"
    >>> describe(log, tool_name="run_tests", arguments={"path": "tests/"}, tokens=21)
    'run_tests(path=tests/): collecting... (4 lines, 21 tokens) exit 1'
    >>> print(excerpt(log, max_tokens=60))
    collecting...
    ok 1
    ERROR test_db.py::test_connect refused
    exit code: 1
    >>> sorted(salient_identifiers("see ERR_42 in app/main.py"))
    ['app/main.py', 'err_42', 'main.py']
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autogen_core.models import ChatCompletionClient, SystemMessage, UserMessage

from ..tokens import count_tokens, truncate_to_tokens

log = logging.getLogger(__name__)

EXCERPT_LINE_CHARS = 200  # one pathological line (minified JSON) must not eat the excerpt
_SCAN_CHARS = 4_000_000  # error-line scan limit: a 20 MB log still compacts in milliseconds

_ERROR_WORDS = (
    "error", "exception", "traceback", "fatal", "fail", "panic", "warn", "denied", "refused", "timeout",
    "timed out", "segmentation fault", "critical", "not found", "cannot", "could not",
)  # fmt: skip
# Lookarounds instead of \b: Python's re scans 100 KB about 8x faster this way.
_ERROR_CODE_RE = re.compile(r"(?<![A-Za-z0-9_])[EW][0-9]{3,5}(?![0-9])")
_ERROR_RE = re.compile("|".join(re.escape(w) for w in _ERROR_WORDS), re.IGNORECASE)
_EXIT_RE = re.compile(
    r"\bexit(?:ed)?(?:\s+with)?\s+(?:code|status)\s*[:=]?\s*(-?\d+)"
    r"|returned non-zero exit status\s+(-?\d+)"
    r"|\breturn\s*code\s*[:=]?\s*(-?\d+)",
    re.IGNORECASE,
)
# Identifiers worth matching between a user message and an offloaded item: file names and paths,
# error codes, snake/camel identifiers with digits or underscores, hex ids, long numbers.
_IDENT_RE = re.compile(
    r"(?:[A-Za-z0-9_.-]*/)*[A-Za-z0-9_-]+\.[A-Za-z][A-Za-z0-9]{0,7}\b"  # file names / paths
    r"|\b[A-Za-z]+[_-]?\d+[A-Za-z0-9_]*\b"  # ERR42, E1234, case_17, HTTP-503
    r"|\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b"  # snake_case identifiers
    r"|\b[0-9a-f]{7,40}\b"  # hashes
    r"|\b\d{3,}\b"  # ports, status codes, ids
)
_STOP_IDENTS = frozenset({"e.g", "i.e", "etc.", "vs.", "a.m", "p.m"})
MAX_SALIENT = 300


@dataclass(frozen=True)
class TextFacts:
    """What the deterministic compaction needs to know about a text, computed in one pass."""

    lines: list[str]
    """Lines split on ``\\n`` (a trailing newline does not make an extra empty line)."""
    errors: list[int]
    """0-based indices of lines that mention errors or warnings (within the first few MB)."""
    status: str | None
    """The last exit status the text reports."""


def _error_lines(text: str, line_starts: list[int], per_side: int = 200) -> list[int]:
    """Indices of lines with an error/warning word or code, C-speed substring scans instead of a regex per
    line. Excerpts show the first and last few such lines only, so each word is searched for at most
    ``per_side`` lines from the start and from the end."""
    scanned = text[:_SCAN_CHARS]
    lower = scanned.lower()
    hits: set[int] = set()
    n = len(line_starts)
    for word in _ERROR_WORDS:
        pos, found = lower.find(word), 0
        while pos != -1 and found < per_side:
            line = bisect_right(line_starts, pos) - 1
            hits.add(line)
            found += 1
            pos = lower.find(word, line_starts[line + 1] if line + 1 < n else len(lower))
        if pos == -1:
            continue  # the forward scan saw every occurrence: no second pass from the end
        pos, found = lower.rfind(word), 0
        while pos != -1 and found < per_side:
            line = bisect_right(line_starts, pos) - 1
            hits.add(line)
            found += 1
            pos = lower.rfind(word, 0, line_starts[line]) if line_starts[line] > 0 else -1
    for count, match in enumerate(_ERROR_CODE_RE.finditer(scanned)):
        hits.add(bisect_right(line_starts, match.start()) - 1)
        if count >= 4 * per_side:
            break
    return sorted(hits)


def analyze(text: str) -> TextFacts:
    """Lines, error/warning lines and exit status of ``text`` (one pass; ~ms for 100 KB)."""
    lines = text.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    starts = [0]
    offset = 0
    for line in lines[:-1]:
        offset += len(line) + 1
        starts.append(offset)
    return TextFacts(lines=lines, errors=_error_lines(text, starts), status=exit_status(text))


def first_meaningful_line(text: str) -> str:
    """The first line that has a letter or digit (skips blank lines and ``====`` rules)."""
    for line in text[:20_000].splitlines():
        stripped = line.strip()
        if any(ch.isalnum() for ch in stripped):
            return stripped[:EXCERPT_LINE_CHARS]
    return ""


def exit_status(text: str) -> str | None:
    """The last exit status the text reports (``exit code: 1``, ``returned non-zero exit status 2``)."""
    found: str | None = None
    for match in _EXIT_RE.finditer(text[-4096:]):  # statuses are printed at the end
        found = next(g for g in match.groups() if g is not None)
    return found


def short_arguments(arguments: Mapping[str, Any] | str | None, max_chars: int = 60) -> str:
    """``key=value`` pairs of a tool call, shortened for a one-line description."""
    if not arguments:
        return ""
    if isinstance(arguments, str):
        text = " ".join(arguments.split())
    else:
        parts = []
        for key, value in arguments.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            parts.append(f"{key}={' '.join(str(shown).split())}")
        text = ", ".join(parts)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def describe(
    text: str,
    *,
    tool_name: str | None = None,
    arguments: Mapping[str, Any] | str | None = None,
    tokens: int | None = None,
    kind: str | None = None,
    facts: TextFacts | None = None,
) -> str:
    """Deterministic one-line description: ``tool(args): first line (N lines, T tokens) exit S``."""
    head = first_meaningful_line(text)
    n_lines = len(facts.lines) if facts else text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    size = f"{n_lines} line{'' if n_lines == 1 else 's'}" + (f", {tokens} tokens" if tokens is not None else "")
    label = ""
    if tool_name:
        args = short_arguments(arguments)
        label = f"{tool_name}({args})" if args else tool_name
    elif kind:
        label = kind
    status = facts.status if facts else exit_status(text)
    status_text = f" exit {status}" if status is not None else ""
    prefix = f"{printable(label)}: " if label else ""
    head = printable(head)
    if head and label and _normalise(head).strip("$> ") in _normalise(label):
        head = ""  # the first line only echoes the command already named by the label
    shown = f"{head[:80]} " if head else ""
    return f"{prefix}{shown}({size}){status_text}".strip()


def printable(text: str) -> str:
    """``text`` with control characters (NUL, escape sequences...) replaced by spaces: safe in a description."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else " " for ch in text)


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def excerpt(
    text: str,
    *,
    max_tokens: int = 150,
    head_lines: int = 3,
    tail_lines: int = 3,
    max_error_lines: int = 6,
    facts: TextFacts | None = None,
) -> str:
    """A short view of ``text`` within ``max_tokens``: first and last lines, error/warning lines, exit status.

    Omitted spans are marked ``… [N lines omitted] …``; error lines carry their 1-based line number so
    the model can ask for the surrounding lines (``retrieve_memory(key, lines="120-160")``). Pass ``facts``
    (from :func:`analyze`) to reuse one analysis for several excerpts of the same text.
    """
    if max_tokens <= 0:
        return ""
    # Short enough already (a token is at least one byte, so small texts skip the count).
    if len(text) <= max_tokens * 8 and count_tokens(text) <= max_tokens:
        return text.rstrip("\n")
    facts = facts or analyze(text)
    # Scale the head/tail with the budget (a first-use view of thousands of tokens shows much more), then
    # shrink until it fits: fewer head/tail lines first, then fewer error lines, then shorter lines.
    scale = max(1, max_tokens // 150)
    h, t, e, clip = head_lines * scale, tail_lines * scale, max_error_lines * scale, EXCERPT_LINE_CHARS
    # Sizes are estimated from per-line token counts (cached), and only a candidate that fits is counted
    # exactly: a 2000-token first-use view of a 100 KB log then costs ~1 ms instead of many full counts.
    line_tokens: dict[str, int] = {}

    def estimate(lines: list[str]) -> int:
        total = 0
        for line in lines:
            cost = line_tokens.get(line)
            if cost is None:
                cost = line_tokens[line] = count_tokens(line) + 1
            total += cost
        return total

    target = max_tokens
    while True:
        out = _excerpt_lines(facts.lines, facts.errors, facts.status, h, t, e, clip)
        used = estimate(out)
        if used <= target:
            result = "\n".join(out)
            exact = count_tokens(result)
            if exact <= max_tokens:
                return result
            target = min(target - 1, target * max_tokens // exact)  # the estimate was low: aim lower
            used = target + 1
        if h > 1 or t > 1:
            # Shrink in proportion to the overshoot (one or two rounds instead of many small steps).
            ratio = min(2 / 3, target / used * 0.95)
            h, t = max(1, min(h - 1, int(h * ratio))), max(1, min(t - 1, int(t * ratio)))
            e = max(2, int(e * ratio)) if ratio < 0.5 else e
        elif e > 2:
            e = max(2, e // 2)
        elif clip > 60:
            clip = max(60, clip * 2 // 3)
        else:
            return truncate_to_tokens("\n".join(out), max(1, max_tokens - 2)) + " …"


def _excerpt_lines(
    lines: list[str], errors: list[int], status: str | None, h: int, t: int, e: int, clip: int
) -> list[str]:
    n = len(lines)
    h = min(n, h)
    t = min(max(0, n - h), t)

    def cut(line: str) -> str:
        line = line.rstrip("\r")
        return line if len(line) <= clip else line[: clip - 1] + "…"

    picked: dict[int, str] = {i: cut(lines[i]) for i in range(h)}
    picked.update({i: cut(lines[i]) for i in range(n - t, n)})
    middle = [i for i in errors if h <= i < n - t]
    chosen = middle if len(middle) <= e else middle[: e // 2] + middle[-(e - e // 2) :]
    for i in chosen:
        picked[i] = f"{i + 1}: {cut(lines[i])}"
    out: list[str] = []
    previous = -1
    for i in sorted(picked):
        if i > previous + 1:
            out.append(f"… [{i - previous - 1} lines omitted] …")
        out.append(picked[i])
        previous = i
    if previous < n - 1:
        out.append(f"… [{n - previous - 1} lines omitted] …")
    if status is not None and not any(_EXIT_RE.search(line) for line in out):
        out.append(f"exit status: {status}")
    return out


def salient_identifiers(text: str, limit: int = MAX_SALIENT) -> set[str]:
    """Lower-cased identifiers (file names, error codes, ids) used to tell what a user message refers to.

    Looks at the head, the tail and the error lines of big texts, so the cost stays bounded.
    """
    if len(text) > 200_000:
        lines = text.splitlines()
        middle = lines[200:-200][:50_000]
        focus = (
            lines[:200]
            + lines[-200:]
            + [ln for ln in middle if _ERROR_RE.search(ln) or _ERROR_CODE_RE.search(ln)][:500]
        )
        text = "\n".join(focus)
    found: set[str] = set()
    for match in _IDENT_RE.finditer(text):
        token = match.group(0).lower().strip(".-")
        if len(token) < 3 or token in _STOP_IDENTS:
            continue
        found.add(token)
        if "/" in token:
            found.add(token.rsplit("/", 1)[1])
        if len(found) >= limit:
            break
    return found


def message_identifiers(text: str) -> set[str]:
    """Identifiers in a (short) user message, same normalisation as :func:`salient_identifiers`."""
    return salient_identifiers(text[:20_000], limit=100)


_LLM_DESCRIBE_PROMPT = (
    "You write one-line descriptions (at most 20 words) of stored tool outputs, logs and pastes, so an agent "
    "knows what the stored item contains. Mention the command or tool, the outcome (success, failure, error "
    "codes) and the most important facts. Reply with the description only."
)


async def llm_description(
    model_client: ChatCompletionClient,
    text: str,
    *,
    fallback: str,
    hint: str = "",
    timeout_seconds: float = 10.0,
    max_input_tokens: int = 1500,
) -> str:
    """A one-line LLM description of ``text``; ``fallback`` on any error, timeout or empty answer."""
    view = excerpt(text, max_tokens=max_input_tokens)
    prompt = f"{hint}\n\n{view}" if hint else view
    try:
        result = await asyncio.wait_for(
            model_client.create(
                [SystemMessage(content=_LLM_DESCRIBE_PROMPT), UserMessage(content=prompt, source="user")]
            ),
            timeout=timeout_seconds,
        )
    except Exception as exc:  # any failure of an optional helper falls back, never loses the offload
        log.info("LLM description failed (%s); using the deterministic one", type(exc).__name__)
        return fallback
    content = result.content
    if not isinstance(content, str):
        return fallback
    line = " ".join(content.split())
    return line[:160] if line else fallback


_LLM_JUDGE_PROMPT = (
    "An agent's context holds stored items, listed as KEY: description. Given the user's new message, decide "
    'which stored items the agent needs expanded to answer it. Reply with JSON only: {"expand": ["KEY", ...]} '
    "(an empty list when none is needed)."
)


async def llm_select_keys(
    model_client: ChatCompletionClient,
    message: str,
    candidates: Iterable[tuple[str, str]],
    *,
    timeout_seconds: float = 10.0,
) -> list[str] | None:
    """Keys (among ``candidates``) an LLM judge wants expanded for ``message``; ``None`` on any failure.

    Keys the model invents (not among the candidates) are ignored, so a forged or foreign key can never be
    selected this way.
    """
    allowed = dict(candidates)
    if not allowed:
        return []
    listing = "\n".join(f"{key}: {desc}" for key, desc in allowed.items())
    prompt = f"Stored items:\n{listing}\n\nUser message:\n{message[:4000]}"
    try:
        result = await asyncio.wait_for(
            model_client.create(
                [SystemMessage(content=_LLM_JUDGE_PROMPT), UserMessage(content=prompt, source="user")],
                json_output=True,
            ),
            timeout=timeout_seconds,
        )
        content = result.content
        if not isinstance(content, str):
            return None
        match = re.search(r"\{.*\}", content, re.DOTALL)
        data = json.loads(match.group(0) if match else content)
        keys = data.get("expand", []) if isinstance(data, dict) else data
        if not isinstance(keys, list):
            return None
        return [k for k in keys if isinstance(k, str) and k in allowed]
    except Exception as exc:  # the judge is optional: the deterministic rules decide instead
        log.info("LLM expansion judge failed (%s); using deterministic relevance", type(exc).__name__)
        return None
