"""The lint rules of pyproject.toml ([tool.ruff]) hold on the whole tree: imports sorted, no unused or undefined
names, lines within 120 columns.

    python -m pytest -q tests/test_lint.py        (or directly: python -m ruff check .)
"""
from __future__ import annotations

import subprocess
import sys

from tests.helpers.commands import ROOT


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"`python -m ruff check .` found:\n{proc.stdout}{proc.stderr}"
