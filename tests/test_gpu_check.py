import pytest

"""The device script's smoke mode: steps of benchmarks/gpu_check.py run on CPU (tiny shapes, the Triton
interpreter) and write their JSON + Markdown records as they go, so the script is ready for a GPU session.

To stay fast this runs env, bench_rope and pool_throughput (~1 min on an idle 2-core machine); kernel_tests and
train_determinism wrap the RoPE tests and tests/train_runs.py, which the suite runs anyway; the full smoke run
(`python benchmarks/gpu_check.py --smoke`, 1.5-4 min here) is recorded in benchmarks/results/gpu_smoke_check.md.

Run: ``python -m pytest -q tests/test_gpu_check.py``
"""
import json
import subprocess
import sys

from tests.helpers.commands import ROOT

STEPS = ["env", "bench_rope", "pool_throughput"]


@pytest.mark.slow
def test_smoke_mode_runs_the_steps_and_records_them(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--smoke", "--only", ",".join(STEPS),
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=500)
    summary = json.loads((tmp_path / "gpu_smoke_check.json").read_text())
    assert proc.returncode == 0, (proc.stdout, summary)
    assert [s["step"] for s in summary["steps"]] == STEPS
    assert all(s["verdict"] == "pass" for s in summary["steps"]), summary
    assert summary["smoke"] is True and summary["env"]["torch"] and summary["env"]["device"]
    md = (tmp_path / "gpu_smoke_check.md").read_text()
    assert md.startswith("# GPU check (smoke run on CPU") and "| pool_throughput | pass |" in md
    data = {s["step"]: s["data"] for s in summary["steps"]}
    assert [c["runs_per_device"] for c in data["pool_throughput"]["configs"]] == [1, 2]
    bench = json.loads((tmp_path / "gpu_smoke_bench_rope_cuda.json").read_text())
    ours = [r for r in bench["rows"] if r["impl"] == "triton (ours)"]
    assert ours and all(r["ok"] and r["max_abs_err"] <= r["tolerance"] for r in ours)
    assert {(r["layout"], r["positions"]) for r in ours} == {("half", "none"), ("interleaved", "ids")}
    assert not (tmp_path / "bench_rope_cuda.json").exists()     # a dry run never takes the measured name


def test_unknown_step_is_one_line_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--only", "env,warp", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--only: unknown step(s) ['warp']" in proc.stderr
    assert not list(tmp_path.iterdir())
