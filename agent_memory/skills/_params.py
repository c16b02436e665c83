"""Checks on what callers hand the skills wing: parameter schemas, parameter values, lists of short strings.

Example:
    >>> validate_params({"type": "object", "properties": {"top": {"type": "integer", "default": 3}}}, {})
    {'top': 3}
    >>> clean_strings([" a ", "a", "b"], "tags")
    ['a', 'b']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema

from ._models import SkillError

MAX_LIST_ITEMS = 20  # example prompts and tags kept per skill


def clean_strings(values: Sequence[str] | None, what: str, limit: int = MAX_LIST_ITEMS) -> list[str]:
    """Stripped, distinct, non-empty strings (each at most 500 characters, at most ``limit``)."""
    out: list[str] = []
    for value in values or []:
        if not isinstance(value, str):
            raise SkillError(f"{what} must be strings, got {type(value).__name__}")
        value = value.strip()
        if "\x00" in value:
            raise SkillError(f"{what} contain a NUL character")
        if value and value not in out:
            out.append(value[:500])
    return out[:limit]


def check_parameters_schema(schema: object) -> dict[str, Any]:
    """A JSON Schema of type object (checked with jsonschema's metaschema)."""
    if schema is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    if not isinstance(schema, dict):
        raise SkillError("parameters must be a JSON Schema object such as {'type': 'object', 'properties': {...}}")
    schema = dict(schema)
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        raise SkillError("the parameters schema must have type 'object' (parameters are passed by name)")
    schema.setdefault("properties", {})
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise SkillError(f"the parameters schema is not a valid JSON Schema: {exc.message}") from None
    return schema


def validate_params(schema: dict[str, Any], params: object) -> dict[str, Any]:
    """``params`` with schema defaults filled in; :class:`SkillError` listing every problem when invalid."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise SkillError(f"parameters must be an object (a dict of name -> value), got {type(params).__name__}")
    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(params), key=lambda e: list(e.path))
    if problems:
        detail = "; ".join(
            (f"{'.'.join(str(p) for p in e.path)}: " if e.path else "") + e.message for e in problems[:10]
        )
        raise SkillError(f"invalid parameters: {detail}. Expected schema: {json.dumps(schema)}")
    filled = dict(params)
    for key, prop in (schema.get("properties") or {}).items():
        if key not in filled and isinstance(prop, dict) and "default" in prop:
            filled[key] = prop["default"]
    return filled
