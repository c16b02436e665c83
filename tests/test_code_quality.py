"""The style rules CI enforces: ruff (lint + format, line length 120) and mypy --strict on agent_memory/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (pip install -e '.[dev]')")
def test_ruff_lint_passes() -> None:
    result = _run("ruff", "check", "agent_memory", "chainlit_app", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed (pip install -e '.[dev]')")
def test_ruff_format_is_clean() -> None:
    result = _run("ruff", "format", "--check", "agent_memory", "chainlit_app", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes_on_the_library() -> None:
    result = _run(sys.executable, "-m", "mypy", "agent_memory")
    assert result.returncode == 0, result.stdout + result.stderr
