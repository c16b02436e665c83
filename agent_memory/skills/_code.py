"""Skill code: checks at registration, parameter schemas from signatures, and the program that runs a skill.

A **python** skill is one of two shapes:

* a function: the code defines a top-level function (the *entrypoint*: named like the skill, ``run``, or given
  explicitly); ``use_skill`` executes the module with ``__name__ == "__skill__"`` and calls the function with the
  validated parameters as keyword arguments. A non-``None`` return value is printed (strings as they are, anything
  else as JSON).
* a script: no entrypoint; the module runs as ``__main__`` with a global ``params`` dict.

A **bash** skill gets ``SKILL_PARAMS`` (JSON) and one variable per scalar parameter.

Example:
    >>> schema_from_function("def count_words(path: str, top: int = 3) -> dict: ...", "count_words")
    {'type': 'object', 'properties': {'path': {'type': 'string'}, 'top': {'type': 'integer', 'default': 3}}, \
'required': ['path'], 'additionalProperties': False}
    >>> python_program("def add(a: int, b: int) -> int:\\n    return a + b\\n", "add", {"a": 1, "b": 2},
    ...                "add").splitlines()[-4]
    "_skill_result = _skill_ns['add'](**params)"
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from typing import Any

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
LANGUAGES = ("python", "bash")
_JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
    "List": "array",
    "Dict": "object",
    "Sequence": "array",
    "Mapping": "object",
}


class SkillCodeError(ValueError):
    """The code, name or parameter schema of a skill is unusable; the message says why."""


def check_name(name: object) -> str:
    """Skill names are lowercase identifiers (``a-z0-9_-``, at most 64 characters, starting with a letter)."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SkillCodeError(
            f"invalid skill name {name!r}: use 1-64 lowercase letters, digits, '_' or '-', starting with a letter "
            "(e.g. 'count_words')"
        )
    return name


def identifier(name: str) -> str:
    """The Python identifier of a skill name (``count-words`` -> ``count_words``)."""
    return name.replace("-", "_")


def parse_python(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise SkillCodeError(f"the skill code is not valid Python: {exc.msg} (line {exc.lineno})") from None


def top_level_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def find_entrypoint(code: str, name: str, explicit: str | None = None) -> str | None:
    """The function ``use_skill`` calls: ``explicit``, else the one named like the skill, else ``run``; None: script."""
    functions = top_level_functions(parse_python(code))
    if explicit is not None:
        if explicit not in functions:
            raise SkillCodeError(f"entrypoint {explicit!r} is not a top-level function of the skill code")
        return explicit
    for candidate in (identifier(name), "run"):
        if candidate in functions:
            node = functions[candidate]
            if isinstance(node, ast.AsyncFunctionDef):
                raise SkillCodeError(f"entrypoint {candidate!r} must be a plain function, not async")
            return candidate
    return None


def _annotation_schema(node: ast.expr | None) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "str" string annotations
        return _annotation_schema(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Name) and node.id in _JSON_TYPES:
        return {"type": _JSON_TYPES[node.id]}
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _JSON_TYPES:
        return {"type": _JSON_TYPES[node.value.id]}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        left, right = _annotation_schema(node.left), _annotation_schema(node.right)
        if isinstance(node.right, ast.Constant) and node.right.value is None and "type" in left:
            return {"type": [left["type"], "null"]}
        if isinstance(node.left, ast.Constant) and node.left.value is None and "type" in right:
            return {"type": [right["type"], "null"]}
    return {}


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def schema_from_function(code: str, entrypoint: str) -> dict[str, Any]:
    """A JSON Schema (type object) for the entrypoint's parameters: types from annotations, defaults, required."""
    node = top_level_functions(parse_python(code)).get(entrypoint)
    if node is None:
        raise SkillCodeError(f"no top-level function {entrypoint!r} in the skill code")
    args = node.args
    if args.posonlyargs:
        raise SkillCodeError(f"{entrypoint}() has positional-only parameters; skills are called with keywords")
    positional = args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, default in pairs:
        prop = _annotation_schema(arg.annotation)
        if default is None:
            required.append(arg.arg)
        else:
            ok, value = _literal(default)
            if ok:
                prop["default"] = value
        properties[arg.arg] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if args.kwarg is None:
        schema["additionalProperties"] = False
    return schema


def check_schema_matches(code: str, entrypoint: str, schema: dict[str, Any]) -> None:
    """Refuse a schema the entrypoint cannot be called with (a required argument missing from the schema...)."""
    node = top_level_functions(parse_python(code))[entrypoint]
    derived = schema_from_function(code, entrypoint)
    props = set((schema.get("properties") or {}).keys())
    missing = [p for p in derived["required"] if p not in props]
    if missing:
        raise SkillCodeError(f"{entrypoint}() requires {missing} but the parameter schema does not declare them")
    if node.args.kwarg is None:
        unknown = sorted(props - set(derived["properties"]))
        if unknown:
            raise SkillCodeError(f"the parameter schema declares {unknown} but {entrypoint}() does not accept them")


def strip_driver(code: str, entrypoint: str) -> str:
    """The code without top-level calls and ``if __name__ == "__main__"`` blocks (what ran it for one input).

    Imports, definitions and constant assignments stay: they are the reusable part of code that worked.
    """
    tree = parse_python(code)
    kept: list[str] = []
    for node in tree.body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if isinstance(node, ast.Expr) and not docstring:
            continue  # print(f(...)), f(...): the driver
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        segment = ast.get_source_segment(code, node, padded=False)
        if segment is None:
            segment = ast.unparse(node)
        decorators = getattr(node, "decorator_list", [])
        if decorators:  # get_source_segment starts at "def"; keep the decorators
            first = min(d.lineno for d in decorators)
            segment = "\n".join(code.splitlines()[first - 1 : node.end_lineno])
        kept.append(segment)
    out = "\n\n".join(kept).strip() + "\n"
    if entrypoint not in top_level_functions(parse_python(out)):
        raise SkillCodeError(f"no top-level function {entrypoint!r} left after removing the driver code")
    return out


def driver_defaults(code: str, entrypoint: str) -> dict[str, Any]:
    """Literal arguments of the first top-level call of ``entrypoint`` (they become the schema's defaults)."""
    tree = parse_python(code)
    node = top_level_functions(tree).get(entrypoint)
    if node is None:
        return {}
    names = [a.arg for a in node.args.args]
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Call) and isinstance(stmt.func, ast.Name) and stmt.func.id == entrypoint:
            values: dict[str, Any] = {}
            for i, arg in enumerate(stmt.args):
                ok, value = _literal(arg)
                if ok and i < len(names):
                    values[names[i]] = value
            for kw in stmt.keywords:
                ok, value = _literal(kw.value)
                if ok and kw.arg is not None:
                    values[kw.arg] = value
            return values
    return {}


def python_program(code: str, name: str, params: dict[str, Any], entrypoint: str | None) -> str:
    """A self-contained Python program that runs the skill once with ``params`` (JSON, already validated)."""
    params_json = json.dumps(params, ensure_ascii=False, sort_keys=True)
    filename = f"<skill {name}>"
    return (
        "import json as _skill_json\n"
        "import linecache as _skill_linecache\n"
        "import sys as _skill_sys\n"
        "import traceback as _skill_traceback\n"
        # The interpreter's own traceback printer reads source files from disk; this one reads linecache.
        "_skill_sys.excepthook = _skill_traceback.print_exception\n"
        f"params = _skill_json.loads({params_json!r})\n"
        f"_skill_src = {code!r}\n"
        # Tracebacks then show the skill's own lines, so a model (or a person) can see what failed.
        f"_skill_linecache.cache[{filename!r}] = (len(_skill_src), None, _skill_src.splitlines(True), {filename!r})\n"
        f"_skill_ns = {{'__name__': {('__skill__' if entrypoint else '__main__')!r}, 'params': params}}\n"
        f"exec(compile(_skill_src, {filename!r}, 'exec'), _skill_ns)\n"
        + (
            f"_skill_result = _skill_ns[{entrypoint!r}](**params)\n"
            "if _skill_result is not None:\n"
            "    print(_skill_result if isinstance(_skill_result, str)\n"
            "          else _skill_json.dumps(_skill_result, default=str, ensure_ascii=False, sort_keys=True))\n"
            if entrypoint
            else ""
        )
    )


def bash_program(code: str, params: dict[str, Any]) -> str:
    """The bash script with ``SKILL_PARAMS`` and one exported variable per scalar parameter prepended."""
    lines = [f"export SKILL_PARAMS={shlex.quote(json.dumps(params, ensure_ascii=False, sort_keys=True))}"]
    for key, value in sorted(params.items()):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and isinstance(value, str | int | float | bool):
            text = json.dumps(value) if isinstance(value, bool) else str(value)
            lines.append(f"export {key}={shlex.quote(text)}")
    return "\n".join(lines) + "\n" + code
