"""The suite keeps to itself when other pytest processes run on the machine as the same OS user."""

from __future__ import annotations

import pytest


def test_the_run_has_its_own_temporary_base_directory(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> None:
    base = tmp_path_factory.getbasetemp()
    if pytestconfig.invocation_params.args and any(
        a.startswith("--basetemp") for a in pytestconfig.invocation_params.args
    ):
        pytest.skip("an explicit --basetemp was given")
    # Not pytest's shared /tmp/pytest-of-<user>, which another run prunes at start-up.
    assert base.name.startswith("agent-memory-tests-")
    assert "pytest-of-" not in str(base)
