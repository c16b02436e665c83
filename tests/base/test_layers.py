"""The shape of the library holds (docs/architecture.md): imports only go down the layers, no import circles,
SQL only in the store and search wings, no module over 600 lines, at most 12 top-level modules.

Imports under ``if TYPE_CHECKING:`` do not count: they never run.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "agent_memory"
BASE = {"config", "errors", "tokens", "placeholders", "validation", "models"}
LAYERS = {"cli": 7, "mcp": 7, "agents": 6, "skills": 5, "context": 4, "tools": 4, "auth": 4, "store": 3, "search": 3}
SQL_WINGS = {"store", "search"}
MAX_LINES = 600
MAX_TOP_LEVEL = 12
# Calls that send SQL to PostgreSQL (asyncpg's connection and pool methods).
SQL_CALL = re.compile(r"\.(fetch|fetchrow|fetchval|execute|executemany|copy_records_to_table)\(")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> int:
    w = wing(module)
    if w in ("", "__main__"):
        return 8  # the package face and `python -m agent_memory` may import anything
    if w in BASE:
        return 1
    assert w in LAYERS, f"{module} is neither in a wing nor a base module"
    return LAYERS[w]


def runtime_imports(module: str) -> set[str]:
    """The agent_memory modules ``module`` imports when it runs (TYPE_CHECKING blocks excluded)."""
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for n in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                here = module.split(".")
                keep = len(here) - node.level + (1 if path.name == "__init__.py" else 0)
                target = ".".join(here[:keep] + ([node.module] if node.module else []))
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)
    known = modules()
    return {m for m in found if m in known and m != module}


def test_nothing_imports_a_higher_layer() -> None:
    upward = [
        f"{m} imports {d}"
        for m in modules()
        if m != "agent_memory" and not m.endswith("__main__")
        for d in runtime_imports(m)
        if d != "agent_memory" and wing(d) != wing(m) and layer(d) > layer(m)
    ]
    assert upward == []


def test_there_are_no_import_circles() -> None:
    # Wing faces only hand names on, so circles are looked for between the modules that do the work.
    graph = {
        m: {d for d in runtime_imports(m) if modules()[d].name != "__init__.py"}
        for m, p in modules().items()
        if p.name != "__init__.py"
    }
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert circles == []


UI_APP = PACKAGE.parent / "chainlit_app"
OUTSIDE_SQL_WINGS = sorted(
    [str(p.relative_to(PACKAGE.parent)) for m, p in modules().items() if wing(m) not in SQL_WINGS]
    + [str(p.relative_to(PACKAGE.parent)) for p in UI_APP.rglob("*.py")]
)


@pytest.mark.parametrize("source", OUTSIDE_SQL_WINGS)
def test_sql_is_sent_only_from_the_store_and_search_wings(source: str) -> None:
    text = (PACKAGE.parent / source).read_text(encoding="utf-8")
    assert not SQL_CALL.search(text), f"{source} sends SQL; give the store a method instead"
    assert '"User"' not in text.replace('``"User"', ""), f"{source} names the User table"


def test_no_module_is_over_600_lines() -> None:
    long = {m: n for m, p in modules().items() if (n := p.read_text(encoding="utf-8").count("\n")) > MAX_LINES}
    assert long == {}


def test_the_top_level_stays_small() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


@pytest.mark.parametrize("module", sorted(m for m in modules() if wing(m) == "search"))
def test_search_gets_the_user_from_the_store_and_never_names_the_user_table(module: str) -> None:
    # The store resolves the user (store/_scoping.py); ranking filters by the row id it is handed.
    assert '"User"' not in modules()[module].read_text(encoding="utf-8")
