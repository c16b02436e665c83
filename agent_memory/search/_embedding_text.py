"""What a memory's vector is computed from.

A short memory is embedded whole (description + content). A long command output is different: the line that
matters ("java.lang.OutOfMemoryError: Java heap space" at line 2,417) is buried in thousands of lines, and the
embedder reads only its first ~112 word pieces. So a long output is embedded as its description, its distinct
*salient lines* (the failure vocabulary of logs and tools: error, fatal, exception, refused, killed, timed out,
...; the strongest first, repeats that differ only in numbers once) and its last lines (the summary). A long
output with no salient line keeps the description + head + tail recipe.

Salient lines are picked in SQL (:data:`SALIENT_LINES_SQL`, one memory at a time, within
:data:`SALIENT_TIMEOUT_MS`), so the worker never fetches whole outputs and one pathological output cannot stall
a batch.

Example:
    >>> log = "\\n".join(f"INFO step {i} ok" for i in range(3000)) + "\\nERROR: disk full on /dev/sda1\\ndone"
    >>> text = embedding_text("backup job", log[:1500], log[-500:], len(log), ["ERROR: disk full on /dev/sda1"])
    >>> text.splitlines()[:2]
    ['backup job', 'ERROR: disk full on /dev/sda1']
"""

from __future__ import annotations

from collections.abc import Sequence

EMBEDDING_RECIPE = 2  # stored with each vector (schema v12); 1 = the head recipe of earlier versions
HEAD_CHARS = 1500  # the head of a memory's content read into its vector (the command and its first lines)
TAIL_CHARS = 500  # ... and the tail of a long one (the final error or summary)
SCAN_CHARS = 1_000_000  # salient lines are looked for in the first million characters (and in the tail)
SALIENT_LINE_CHARS = 200  # each salient line is cut to this
SALIENT_BUDGET = 700  # characters of salient lines in the text (the embedder reads ~112 word pieces anyway)
SALIENT_MAX_LINES = 40
TAIL_LINES = 3

# Case-insensitive, from the start of a word (PostgreSQL ARE: \m). Strong words name a failure; weak ones often
# accompany it. Generic log and tool vocabulary, not tuned on any evaluation set's outputs.
_STRONG = (
    r"error|fatal|fail(ed|ure)?|exception|traceback|panic|critical|emerg|denied|refused|killed|oom\M|"
    r"out of memory|segmentation|segfault|abort(ed)?\M|crash(ed)?\M|deadlock|exhausted|no space|unreachable|"
    r"expired|rejected|timed out|exit(ed)? (code|status) [1-9]"
)
_WEAK = (
    r"err\M|failing|forbidden|unauthori[sz]ed|timeout|conflict|cannot|can't|could not|unable|invalid|missing|"
    r"not found|warn(ing)?\M|exit(ed)? (code|status)"
)


def _literal(text: str) -> str:
    # An E'' literal: its backslashes mean the same whatever standard_conforming_strings says.
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


_STRONG_RE, _EITHER_RE = _literal(rf"\m({_STRONG})"), _literal(rf"\m({_STRONG}|{_WEAK})")
_TRIM = "btrim(x.l, E' \\t\\r')"

# $1 the memory's id, $2 its user. One row (or none: not long, or no failure word at all, found by one scan of
# the text before it is split into lines). A longer content than SCAN_CHARS is read as the whole lines of its
# first SCAN_CHARS and of its tail (the line each cut falls in is dropped, so a repeat is not counted again as a
# fragment). Lines that differ only in numbers or hex ids count once (their first occurrence); strong ones
# come before weak ones, each group in line order.
SALIENT_LINES_SQL = f"""
WITH c AS (
    SELECT m.content AS t, left(m.content, {SCAN_CHARS}) AS head, right(m.content, {TAIL_CHARS}) AS tail,
           m.char_count
    FROM agent_memories m
    WHERE m.id = $1 AND m.user_id = $2 AND m.char_count > {HEAD_CHARS + TAIL_CHARS}
),
s AS (
    SELECT CASE WHEN c.char_count <= {SCAN_CHARS} THEN c.t
                ELSE left(c.head, length(c.head) - strpos(reverse(c.head), E'\\n'))
                     || E'\\n' || substr(c.tail, strpos(c.tail, E'\\n') + 1) END AS t
    FROM c
)
SELECT ARRAY(
    SELECT line FROM (
        SELECT DISTINCT ON (sig) line, n, strong FROM (
            SELECT left({_TRIM}, {SALIENT_LINE_CHARS}) AS line, x.n, x.l ~* {_STRONG_RE} AS strong,
                   regexp_replace(lower(left({_TRIM}, 120)), '[0-9a-f]*[0-9][0-9a-f]*', '#', 'g') AS sig
            FROM regexp_split_to_table(s.t, E'\\n') WITH ORDINALITY AS x(l, n)
            WHERE x.l ~* {_EITHER_RE}
        ) y ORDER BY sig, n
    ) d ORDER BY strong DESC, n LIMIT {SALIENT_MAX_LINES}
)
FROM s
WHERE s.t ~* {_EITHER_RE}
"""
SALIENT_TIMEOUT_MS = 2000  # a pathological output (a million short lines) gets the head recipe instead


def embedding_text(
    description: str, content_head: str, content_tail: str, char_count: int, salient: Sequence[str] = ()
) -> str:
    """The text embedded for one memory.

    Short content: description + content. Long content: description + salient lines (up to
    :data:`SALIENT_BUDGET` characters) + its last lines; without salient lines, description + head + tail.
    """
    desc = description.strip()
    if char_count <= HEAD_CHARS + TAIL_CHARS:
        return "\n".join(p for p in (desc, content_head) if p)
    picked: list[str] = []
    used = 0
    for line in salient:
        if picked and used + len(line) > SALIENT_BUDGET:
            break
        picked.append(line)
        used += len(line)
    if not picked:
        return "\n".join(p for p in (desc, content_head, "...\n" + content_tail) if p)
    last = "\n".join(content_tail.rstrip().splitlines()[-TAIL_LINES:])
    return "\n".join(p for p in (desc, *picked, "...", last) if p)
