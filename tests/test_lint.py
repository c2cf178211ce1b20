"""The tree stays uniform: ruff's lint rules and formatter (configured in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["munet", "tests", "benchmarks", "examples"]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(args):
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"ruff {' '.join(args)} found problems:\n{result.stdout}{result.stderr}"
