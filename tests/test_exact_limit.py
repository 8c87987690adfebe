"""benchmarks/exact_limit.py: a small run writes the limit and the candidates, and at 5 vs 5 and alpha / 3 every
exact candidate has the power of the permutation of means (the claim docs/decisions.md makes); bad input is one
line and exit 2.

    python -m pytest -q -n 0 tests/test_exact_limit.py
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "exact_limit.py"), *args], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_bad_reps_is_one_line_and_exit_2(tmp_path):
    proc = _run("--reps", "0", "--out", str(tmp_path))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "--reps=0" in proc.stderr
    assert not (tmp_path / "exact_limit.json").exists()


@pytest.mark.slow
def test_small_run_puts_every_candidate_at_or_below_the_limit(tmp_path):
    proc = _run("--reps", "2000", "--candidate-reps", "40", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((tmp_path / "exact_limit.json").read_text())["rows"]
    assert len(rows) == 2 * 4 * 2 * 2 and (tmp_path / "exact_limit.md").exists()
    for r in rows:
        p = r["power"]
        if r["design"].startswith("independent") and r["level"] < 0.02 and r["candidates"]:
            # 4 of 252 splits: every statistic that ranks the full separation first rejects the same sweeps
            assert p["deciding test (clipped Welch t)"] == p["max-type (raw, clipped Welch t)"] == \
                p["permutation of means"]
        if not r["candidates"] and r["level"] < 0.02:     # the limit at alpha / 3: the exact test trails the t-test
            t, exact = (p["paired t"], p["sign-flip of the mean"]) if "paired" in r["design"] else \
                (p["Student t"], p["permutation of means"])
            assert t - 0.05 < exact < t
