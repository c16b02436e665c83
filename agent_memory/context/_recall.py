"""What a context brings back by itself: expansions, recall for vague requests, the user layer, references.

* **Expansion**: a user message that shares identifiers (file names, error codes, keys) with an offloaded
  item, or asks for "the log"/"the error", gets the matching lines of that item for one turn. With an LLM
  judge the model picks the items instead (only keys of this context can be picked).
* **Recall**: a short vague request ("connect to the db") searches the user's preferences and facts.
* **User layer**: the user's standing preferences and facts, as one system message.
* **References**: a ``[MemoryRef: ...]`` inside a message counts only once a user-scoped lookup finds it.

Every lookup is scoped to the context's user in SQL (by the store); a database that is down only skips the
step. No model is needed: every rule is deterministic, the optional judge falls back to them on any failure.

Example:
    >>> is_ambiguous("connect to the db"), is_ambiguous("connect to db.example.com:5432")
    (True, False)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from autogen_core.models import ChatCompletionClient, FunctionExecutionResultMessage, LLMMessage, SystemMessage

from ..errors import MemoryNotFound
from ..models import MemoryItem
from ..placeholders import format_memory_ref, parse_memory_refs
from ..store import MemoryStore, apply_transforms
from ..tokens import count_tokens, truncate_to_tokens
from ._compaction import excerpt, llm_select_keys, message_identifiers, printable
from ._config import MemoryContextConfig
from ._offload import DB_UNAVAILABLE_ERRORS
from ._state import ContextEntry, OffloadedPart, ReferencedItem

log = logging.getLogger(__name__)

_DEICTIC_RE = re.compile(
    r"\b(the|that|this|last|previous|latest|above)\s+(full\s+|whole\s+|complete\s+)?"
    r"(log|logs|output|outputs|result|results|error|errors|traceback|stack\s*trace|stdout|stderr|paste|file)\b",
    re.I,
)
_VAGUE_RE = re.compile(
    r"\b(the|my|our|that)\s+(usual\s+|default\s+|preferred\s+)?(db|database|server|host|repo|repository|project|"
    r"cluster|bucket|api|account|environment|env|branch|service|machine|instance|credentials|config|editor|"
    r"language|style|format|deployment|schema)\b|\b(as usual|like last time|same as (before|last time)|"
    r"the usual|my usual|as before|as always)\b",
    re.I,
)
_CONCRETE_RE = re.compile(r"://|@|\b[\w.-]+:\d{2,5}\b|[\w.-]+/[\w.-]+|[\"'`][^\"'`]{2,}[\"'`]")
_SYNONYMS = {
    "db": "database postgres postgresql mysql sqlite",
    "database": "db postgres postgresql",
    "repo": "repository git github",
    "repository": "repo git",
    "env": "environment",
    "server": "host",
    "host": "server",
}
_STOPWORDS = frozenset(
    "the a an to my our of in on for with and please that this it is me us at as same like last time before again "
    "usual default preferred can you could would will do".split()
)
_ERROR_WORD_RE = re.compile(r"\b(error|errors|fail|failed|failure|exception|traceback|warning|warnings)\b", re.I)
_ERROR_GREP = r"(?i)error|exception|traceback|fatal|fail|warning|denied|refused|exit (code|status)"
MAX_EXPANSIONS_PER_TURN = 2
_USER_LAYER_HEADER = "Standing memories of this user (preferences and facts, newest first):"


def is_ambiguous(text: str) -> bool:
    """A short request naming something generic ("the db") without concrete parameters (host, path, URL)."""
    words = text.split()
    if not words or len(words) > 30:
        return False
    return bool(_VAGUE_RE.search(text)) and not _CONCRETE_RE.search(text)


def candidates(entries: list[ContextEntry], exclude: ContextEntry) -> list[OffloadedPart]:
    """Items a user message may refer to: what the context offloaded, and verified references."""
    out: list[OffloadedPart] = []
    seen: set[str] = set()
    for e in entries:
        if e.kind != "message" or e is exclude:
            continue
        for p in e.parts:
            if p.key is not None and p.key not in seen:
                seen.add(p.key)
                out.append(p)
        for r in e.refs:
            if r.key not in seen:
                seen.add(r.key)
                out.append(
                    OffloadedPart(
                        slot=-1,
                        key=r.key,
                        tokens=r.tokens,
                        description=r.description,
                        excerpt="",
                        memory_type=r.memory_type,
                        identifiers=sorted(message_identifiers(r.description)),
                        compacted=True,
                    )
                )
    return out


def _message_texts(msg: LLMMessage) -> list[str]:
    if isinstance(msg, FunctionExecutionResultMessage):
        return [r.content for r in msg.content]
    if isinstance(msg.content, str):
        return [msg.content]
    return [p for p in msg.content if isinstance(p, str)]


class Recaller:
    """The recall steps of one context (its user, settings and optional model)."""

    def __init__(
        self,
        get_store: Callable[[], Awaitable[MemoryStore]],
        config: MemoryContextConfig,
        model_client: ChatCompletionClient | None,
    ) -> None:
        self._get_store = get_store
        self._config = config
        self._model_client = model_client

    @property
    def user_id(self) -> str:
        return self._config.user_id

    async def user_layer(self) -> tuple[SystemMessage | None, list[str]] | None:
        """The user's standing memories as one system message within its budget, and their keys.

        ``None`` when the database is unreachable (the caller retries later).
        """
        budget = self._config.user_layer_max_tokens
        try:
            rows = await (await self._get_store()).standing_memories(user_id=self.user_id, limit=50)
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("user layer not loaded (%s); will retry", exc)
            return None
        lines: list[str] = []
        keys: list[str] = []
        used = count_tokens(_USER_LAYER_HEADER)
        for item, content in rows:
            kind = "preference" if item.memory_type == "user_preference" else "fact"
            if item.token_count <= 80 and len(content) < 2000:
                line = f"- ({kind}) {' '.join(printable(content).split())} [{item.memory_key}]"
            else:
                line = f"- ({kind}) {format_memory_ref(item.memory_key, item.description, item.token_count)}"
            cost = count_tokens(line) + 1
            if used + cost > budget:
                break
            lines.append(line)
            keys.append(item.memory_key)
            used += cost
        return (SystemMessage(content="\n".join([_USER_LAYER_HEADER, *lines])) if lines else None), keys

    async def verified_refs(self, entry: ContextEntry, known: set[str]) -> list[ReferencedItem]:
        """Placeholders in the message's own text that name one of this user's memories (not in ``known``).

        Another user's key, or a made-up one, is not found by the user-scoped lookup and stays plain text.
        """
        keys: list[str] = []
        for text in _message_texts(entry.message):
            if "[MemoryRef: " in text:
                keys.extend(ref.key for ref in parse_memory_refs(text) if ref.key not in known)
        found: list[ReferencedItem] = []
        for key in list(dict.fromkeys(keys))[:10]:
            try:
                item = await (await self._get_store()).get(key, user_id=self.user_id)
            except MemoryNotFound:
                continue
            except DB_UNAVAILABLE_ERRORS as exc:
                log.info("reference %s not verified (%s)", key, exc)
                continue
            found.append(
                ReferencedItem(
                    key=item.memory_key, description=item.description, tokens=item.token_count,
                    memory_type=item.memory_type,
                )
            )  # fmt: skip
        return found

    async def notes_for(self, text: str, offloaded: list[OffloadedPart], shown_keys: list[str]) -> list[ContextEntry]:
        """Entries to add after a user message: expansions of the items it refers to, else (for a vague
        request) the user's matching memories that ``shown_keys`` (the user layer) does not show yet."""
        if not text.strip():
            return []
        chosen: list[tuple[OffloadedPart, set[str]]] = []
        if offloaded:
            keys: list[str] | None = None
            if self._model_client is not None and self._config.llm_judge:
                keys = await llm_select_keys(
                    self._model_client,
                    text,
                    [(p.key or "", p.description) for p in offloaded[-30:]],
                    timeout_seconds=self._config.llm_timeout_seconds,
                )
            if keys is not None:
                by_key = {p.key: p for p in offloaded}
                picked = [by_key[k] for k in keys[:MAX_EXPANSIONS_PER_TURN]]
                hits = await self._content_matches(message_identifiers(text), picked)
                chosen = [(p, hits.get(p.key or "", set())) for p in picked]
            else:
                chosen = await self._select_for_expansion(text, offloaded)
        notes: list[ContextEntry] = []
        for part, matched in chosen:
            if not part.compacted and part.first_use_is_full:
                continue  # already visible in full
            note = await self._expansion(part, matched, text)
            if note is not None:
                notes.append(note)
        if not chosen and self._config.recall_on_ambiguity and is_ambiguous(text):
            note = await self._recall_user_memories(text, shown_keys)
            if note is not None:
                notes.append(note)
        return notes

    async def _content_matches(self, idents: set[str], parts: list[OffloadedPart]) -> dict[str, set[str]]:
        """Which of the message's identifiers occur in each item's stored content (one user-scoped query)."""
        if not idents or not parts:
            return {}
        wanted = sorted(idents, key=len, reverse=True)[:20]
        keys = [p.key for p in parts[-30:] if p.key]  # the newest items; each scanned up to 1 MB
        try:
            return await (await self._get_store()).keys_containing(wanted, user_id=self.user_id, keys=keys)
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("content match for expansion skipped (%s)", exc)
            return {}

    async def _select_for_expansion(
        self, text: str, offloaded: list[OffloadedPart]
    ) -> list[tuple[OffloadedPart, set[str]]]:
        """Deterministic relevance: shared identifiers (file names, error codes, keys) or "the log"."""
        idents = message_identifiers(text)
        lowered = text.lower()
        in_content = await self._content_matches(idents, offloaded)
        scored: list[tuple[int, int, OffloadedPart, set[str]]] = []
        for order, part in enumerate(offloaded):
            assert part.key is not None
            matched = (idents & set(part.identifiers)) | in_content.get(part.key, set())
            score = 3 * len(matched)
            if part.key.lower() in lowered:
                score += 10  # the user names our own key (a foreign key is never a candidate)
            if score:
                scored.append((score, order, part, matched))
        if not scored and _DEICTIC_RE.search(text) and offloaded:
            return [(offloaded[-1], set())]
        scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
        return [(p, m) for _, _, p, m in scored[:MAX_EXPANSIONS_PER_TURN]]

    def _expansion_budget(self) -> int:
        cap = self._config.expansion_max_tokens
        if self._config.token_budget is not None:
            cap = min(cap, self._config.token_budget // 4)
        return cap

    async def _expansion(self, part: OffloadedPart, matched: set[str], request: str) -> ContextEntry | None:
        assert part.key is not None
        budget = self._expansion_budget()
        if budget <= 50:
            return None
        try:
            content = await (await self._get_store()).retrieve(part.key, user_id=self.user_id)
        except MemoryNotFound:
            return None
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("expansion of %s skipped (%s)", part.key, exc)
            return None
        if matched:
            pattern = "|".join(re.escape(m) for m in sorted(matched, key=len, reverse=True))
            view = apply_transforms(content, grep=pattern, ignore_case=True, context=3, max_matches=40)
            how = f"lines matching {', '.join(sorted(matched))} (N: = match, N- = context)"
        elif _ERROR_WORD_RE.search(request):
            view = apply_transforms(content, grep=_ERROR_GREP, context=2, max_matches=40)
            how = "error and warning lines (N: = match, N- = context)"
        else:
            view = ""
            how = ""
        if not view.strip():
            view = excerpt(content, max_tokens=budget - 60)
            how = "excerpt"
        view = truncate_to_tokens(view, budget - 60)
        ref = format_memory_ref(part.key, part.description, part.tokens)
        note = SystemMessage(content=f"[Memory expansion for this request: {ref}, {how}]\n{view}")
        return ContextEntry(message=note, kind="expansion")

    async def _recall_user_memories(self, text: str, shown_keys: list[str]) -> ContextEntry | None:
        words = [w for w in re.findall(r"[A-Za-z0-9_]+", text.lower()) if w not in _STOPWORDS]
        # Short queries (search scores by the share of query words found): the request itself, then the same
        # request with each vague noun replaced by a synonym ("db" -> "database", "postgres"...).
        queries = [" ".join(words)] if words else []
        for i, word in enumerate(words):
            for synonym in _SYNONYMS.get(word, "").split():
                queries.append(" ".join([*words[:i], synonym, *words[i + 1 :]]))
        best: dict[str, MemoryItem] = {}
        try:
            store = await self._get_store()
            for query in queries[:6]:
                for item in await store.search(query, user_id=self.user_id, limit=10):
                    if item.memory_type not in ("user_preference", "user_fact"):
                        continue
                    if item.memory_key not in best or (item.score or 0) > (best[item.memory_key].score or 0):
                        best[item.memory_key] = item
        except DB_UNAVAILABLE_ERRORS as exc:
            log.info("recall for an ambiguous request skipped (%s)", exc)
            return None
        hits = sorted(best.values(), key=lambda h: h.score or 0.0, reverse=True)
        shown = set(shown_keys)
        lines: list[str] = []
        for item in hits:
            if item.memory_key in shown or len(lines) >= 3:
                continue
            shown.add(item.memory_key)
            if item.token_count <= 100:
                try:
                    content = " ".join((await store.retrieve(item.memory_key, user_id=self.user_id)).split())
                except (MemoryNotFound, *DB_UNAVAILABLE_ERRORS):  # type: ignore[misc]
                    continue
                ref = format_memory_ref(item.memory_key, item.description or item.memory_type, item.token_count)
                lines.append(f"- {content} {ref}")
            else:
                lines.append(f"- {format_memory_ref(item.memory_key, item.description, item.token_count)}")
        if not lines:
            return None
        note = "[Possibly relevant memories of this user for the request above:]\n" + "\n".join(lines)
        return ContextEntry(message=SystemMessage(content=note), kind="recall")
