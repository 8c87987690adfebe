"""benchmarks/calibrate.py: the quick mode runs the project's decision rule on simulated sweeps and writes its
table; the committed full run meets the issue-12 targets.

    python -m pytest -q tests/test_calibrate.py
"""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "calibrate.json"


def _run(*args, timeout=600):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calibrate.py"), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.slow
def test_quick_calibration_writes_every_cell(tmp_path):
    proc = _run("--quick", "--reps", "12", "--seed", "3", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "calibrate.json").read_text())
    md = (tmp_path / "calibrate.md").read_text()
    assert result["reps"] == 12 and result["ns"] == [3, 5] and result["seed"] == 3
    names = {c["scenario"] for c in result["cells"]}
    assert len(result["cells"]) == 2 * len(names) and any("baseline loses its worst 30%" in n for n in names)
    for c in result["cells"]:
        assert 0 <= c["fwer"] <= c["fwer_high95"] <= 1 and c["scenario"] in md
        assert math.isnan(c["coverage"]) or 0 <= c["coverage"] <= 1
    # same seed, same numbers
    _run("--quick", "--reps", "12", "--seed", "3", "--out", str(tmp_path / "again"))
    assert json.loads((tmp_path / "again" / "calibrate.json").read_text())["cells"] == result["cells"]


@pytest.mark.slow
def test_bad_reps_is_one_line_and_exit_2(tmp_path):
    proc = _run("--reps", "0", "--out", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.strip() == "--reps=0: accepted values are positive integers"
    assert not (tmp_path / "calibrate.json").exists()


def test_committed_full_calibration_meets_the_targets():
    result = json.loads(RESULTS.read_text())
    assert result["ns"] == [3, 4, 5, 10] and result["reps"] >= 300
    t = result["targets"]
    assert t["coverage_min"] >= 0.93
    # FWER <= 0.05 in every null scenario, up to the simulation's noise (sd 0.013 at 300 sweeps)
    assert all(c["fwer"] <= 0.065 for c in result["cells"] if c["null"])
    assert t["fwer_max"] <= 0.065
    assert t["power_gap_max"] <= 0.06
