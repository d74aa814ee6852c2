"""The package's types and style: mypy --strict over the package, its
example and these tests, and ruff (configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from servers import PACKAGE_DIR


@pytest.mark.parametrize(
    "command",
    [["mypy"], ["ruff", "check", "."], ["ruff", "format", "--check", "."]],
    ids=["mypy --strict", "ruff check", "ruff format"],
)
def test_static_check(command: list[str]) -> None:
    run = subprocess.run([sys.executable, "-m", *command], cwd=PACKAGE_DIR, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
