"""The documented example of sweeper.health runs as written, and importing sweeper stays free of torch.

    python -m pytest -q tests/test_health_docs.py
"""
from __future__ import annotations

import doctest
import json
import subprocess
import sys

import pytest
import torch

import sweeper.health
from sweeper.health import CheckResult, HealthReport
from tests.helpers.commands import ROOT


@pytest.mark.slow
def test_module_docstring_example_runs():
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = doctest.testmod(sweeper.health, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                                 report=True)
    finally:
        torch.set_num_threads(torch_threads)
    assert result.attempted >= 15 and result.failed == 0


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_sweeper_and_health_results_import_without_torch():
    proc = _python("import sys, sweeper, sweeper.health; from sweeper.health import HealthReport, CheckResult; "
                   "HealthReport([CheckResult('x', 'warn')]).to_json(); print('torch' in sys.modules)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_cli_prints_run_dir_health_and_rejects_missing(tmp_path):
    HealthReport([CheckResult("gradient_flow", "fail", 2, "0 dead parameters",
                              "blocks.0.attn.q_proj.weight: gradient exactly zero")]).write(tmp_path / "health.json")
    proc = subprocess.run([sys.executable, "-m", "sweeper.health", str(tmp_path), str(tmp_path / "nope")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "gradient_flow  FAIL" in proc.stdout and "q_proj.weight: gradient exactly zero" in proc.stdout
    assert proc.stderr.strip() == f"{tmp_path / 'nope'}: no health.json here (expected a run dir or a health.json file)"
    assert json.loads((tmp_path / "health.json").read_text())["verdict"] == "fail"
