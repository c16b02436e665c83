"""The style rules CI enforces: ruff (lint + format, line length 120) and mypy --strict on agent_memory/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF_TARGETS = ("agent_memory", "chainlit_app", "tests", "benchmarks")


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    # The tools of this interpreter (the dev extra), so an unactivated venv checks the same as CI.
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_lint_passes() -> None:
    result = _run(sys.executable, "-m", "ruff", "check", *RUFF_TARGETS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(sys.executable, "-m", "ruff", "format", "--check", *RUFF_TARGETS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_passes_on_the_library() -> None:
    result = _run(sys.executable, "-m", "mypy", "agent_memory")
    assert result.returncode == 0, result.stdout + result.stderr
