"""Capture: turn code that worked into a skill draft ("success capture"), deterministically.

Deterministic rules (no model needed):

* Python code with one top-level function (or one named like ``name``): that function is the entrypoint; the
  driver lines that called it for this one task (``print(f("notes.txt"))``, ``if __name__ == "__main__": ...``)
  are removed, the parameter schema comes from the signature, and the literal arguments of the driver call
  become the parameters' defaults, so using the skill with no parameters reproduces the run that worked.
* Anything else (a script, bash): the code as it ran, without parameters.
* Name: the function's name, else the first words of the task (``count_words_notes``); description: the task.

With a ``model_client`` the draft is offered to the model, which may rename it and lift hard-coded values into
parameters; its answer is used only if it is valid (parses, has the entrypoint, a consistent schema), else the
deterministic draft stands.

Example:
    >>> import asyncio
    >>> code = ('def count_words(path: str) -> int:\\n    return len(open(path).read().split())\\n\\n'
    ...         'print(count_words("notes.txt"))\\n')
    >>> d = asyncio.run(propose_from_success("count the words in notes.txt", code))
    >>> (d.name, d.parameters["properties"]["path"]["default"], "print(" in d.code)
    ('count_words', 'notes.txt', False)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any, TypedDict, Unpack

from autogen_core.models import ChatCompletionClient, LLMMessage, SystemMessage, UserMessage

from ._code import (
    NAME_RE,
    SkillCodeError,
    check_schema_matches,
    driver_defaults,
    find_entrypoint,
    identifier,
    parse_python,
    schema_from_function,
    strip_driver,
    top_level_functions,
)
from ._models import SUCCESS_TAG, SkillDraft

log = logging.getLogger(__name__)

_STOPWORDS = {
    "a", "an", "the", "of", "for", "to", "on", "in", "my", "our", "your", "is", "are", "and", "or", "with", "please",
    "can", "could", "you", "me", "i", "we", "it", "this", "that", "from", "by", "how", "many", "much", "what", "which",
    "all", "each", "every", "give", "tell", "show", "find", "get", "do", "does", "file", "files", "into", "as", "at",
}  # fmt: skip

GENERALISE_PROMPT = (
    "You turn Python code that just solved a task into a reusable skill. Reply with ONE JSON object and nothing "
    'else: {"name": "snake_case_name", "description": "what it does and when to use it", "code": "python code '
    "defining a top-level function named exactly like name, whose keyword parameters are the values that change "
    'between similar tasks (with the original values as defaults) and which returns the result", '
    '"example_prompts": ["..."]}. Keep the logic of the original code; do not call the function in the code.'
)


def slug_name(task: str) -> str:
    """A skill name from the first meaningful words of a task (``count_words_notes``)."""
    words = [w for w in re.findall(r"[a-z][a-z0-9]*", task.lower()) if w not in _STOPWORDS and len(w) > 1]
    name = "_".join(words[:4])[:64].strip("_")
    if not name or not NAME_RE.match(name):
        name = "skill_" + hashlib.sha256(task.encode()).hexdigest()[:8]
    return name


def deterministic_draft(
    task: str, code: str, *, language: str = "python", name: str | None = None, description: str | None = None
) -> SkillDraft:
    """The draft without any model (rules in the module docstring)."""
    task = " ".join(task.split())
    desc = (description or task)[:2000]
    tags = [SUCCESS_TAG]
    if language != "python":
        empty: dict[str, Any] = {"type": "object", "properties": {}}
        return SkillDraft(name=name or slug_name(task), description=desc, code=code, language=language,
                          parameters=empty, example_prompts=[task], tags=tags)  # fmt: skip
    functions = top_level_functions(parse_python(code))
    public = [f for f in functions if not f.startswith("_") and f != "main"]
    entry: str | None = None
    if name and identifier(name) in functions:
        entry = identifier(name)
    elif len(public) == 1:
        entry = public[0]
    if entry is None:
        return SkillDraft(name=name or slug_name(task), description=desc, code=code, language="python",
                          parameters=None, example_prompts=[task], tags=tags)  # fmt: skip
    defaults = driver_defaults(code, entry)
    body = strip_driver(code, entry)
    schema = schema_from_function(body, entry)
    for key, value in defaults.items():
        if key in schema["properties"]:
            schema["properties"][key]["default"] = value
            schema["required"] = [r for r in schema["required"] if r != key]
    skill_name = name or (entry if NAME_RE.match(entry) else slug_name(task))
    return SkillDraft(
        name=skill_name, description=desc, code=body, language="python", parameters=schema,
        example_prompts=[task], tags=tags, entrypoint=None if identifier(skill_name) == entry else entry,
    )  # fmt: skip


def _json_object(text: str) -> dict[str, Any]:
    text = text.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    value = json.loads(text[start : end + 1])
    if not isinstance(value, dict):
        raise ValueError("the reply is not a JSON object")
    return value


async def llm_generalise(
    task: str, draft: SkillDraft, original_code: str, output: str | None, model_client: ChatCompletionClient
) -> SkillDraft:
    """Ask the model to generalise ``draft``; raises when its answer is not a valid skill."""
    user = f"Task: {task}\n\nCode that worked:\n```python\n{original_code}\n```\n"
    if output:
        user += f"\nIts output (start):\n{output[:1500]}\n"
    messages: list[LLMMessage] = [SystemMessage(content=GENERALISE_PROMPT), UserMessage(content=user, source="user")]
    result = await model_client.create(messages)
    if not isinstance(result.content, str):
        raise ValueError("the model answered with a tool call, not JSON")
    data = _json_object(result.content)
    name, code = data.get("name"), data.get("code")
    if not isinstance(name, str) or not NAME_RE.match(name) or not isinstance(code, str):
        raise ValueError("the model's skill has no valid name or code")
    entry = find_entrypoint(code, name)
    if entry is None:
        raise SkillCodeError(f"the model's code defines no function {identifier(name)!r}")
    schema = schema_from_function(code, entry)
    check_schema_matches(code, entry, schema)
    prompts = [p for p in data.get("example_prompts", []) if isinstance(p, str)] if isinstance(
        data.get("example_prompts"), list) else []  # fmt: skip
    description = data.get("description") if isinstance(data.get("description"), str) else draft.description
    return SkillDraft(
        name=name, description=str(description)[:2000], code=code, language="python", parameters=schema,
        example_prompts=[task, *prompts][:10], tags=draft.tags, generalised_by_llm=True,
    )  # fmt: skip


class DraftOptions(TypedDict, total=False):
    """How to draft a skill from a success: ``language`` (default python), the skill's ``name`` and
    ``description`` (default: from the code and the task), and the run's ``output`` (shown to the model)."""

    language: str
    name: str | None
    description: str | None
    output: str | None


async def propose_from_success(
    task: str, code: str, *, model_client: ChatCompletionClient | None = None, **options: Unpack[DraftOptions]
) -> SkillDraft:
    """A skill draft from code that worked for ``task``; see the module docstring."""
    language = options.get("language", "python")
    draft = deterministic_draft(
        task, code, language=language, name=options.get("name"), description=options.get("description")
    )
    if model_client is None or language != "python":
        return draft
    try:
        return await llm_generalise(task, draft, code, options.get("output"), model_client)
    except Exception as exc:  # the model is an improvement, never a requirement
        log.info("skill generalisation by the model failed (%s); using the deterministic draft", exc)
        return draft
