"""seeds=adaptive end to end: real sweeps of a one-second task (tests/fixtures/adaptive) on the local pool,
interrupted with a real SIGINT during a look and resumed with its looks intact; on the real Slurm cluster; bad
adaptive settings are one line, exit 2, nothing written."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sweeper.plan.looks import read_looks
from sweeper.run.files.manifest import read_manifest
from tests.helpers.commands import ROOT, run_sweeper, sweeper_cli

FIXTURE = ROOT / "tests" / "fixtures" / "adaptive"
ARGS = ["--config-dir", str(FIXTURE / "conf"), "+experiment=ad", "seeds=adaptive", "sweeper.adaptive.start=3",
        "sweeper.adaptive.batch=2", "sweeper.adaptive.max_seeds=5", "sweeper.journal=off"]
LOCAL = ["launcher.max_parallel=2"]


def _sweep(sweep_dir, *extra, timeout=300):
    local = [] if "launcher=slurm" in extra else LOCAL     # launcher.max_parallel is a key of the local launcher
    return run_sweeper(*ARGS, *local, f"sweeper.dir={sweep_dir}", *extra, cwd=FIXTURE, timeout=timeout)


def _seeds(sweep_dir):
    m = read_manifest(sweep_dir)
    out = {}
    for r in m.runs:
        out.setdefault(r.variant, set()).add(r.seed)
    return {v: sorted(s) for v, s in out.items()}


@pytest.fixture(scope="module")
def adaptive_sweep(tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("adaptive") / "sweep"
    proc = _sweep(sweep_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return sweep_dir, proc


@pytest.mark.slow
def test_decided_variants_stop_and_open_ones_get_more_seeds(adaptive_sweep):
    sweep_dir, proc = adaptive_sweep
    rec = read_looks(sweep_dir)
    states = rec["states"]
    assert states["big"]["status"] == "worse" and [lk["n"] for lk in states["big"]["looks"]][-1] <= 5
    assert [lk["seeds"] for lk in rec["looks"]][0] == {"base": 3, "big": 3, "mid": 3}
    seeds = _seeds(sweep_dir)
    for v, s in states.items():                       # each variant ran exactly the seeds of its looks
        assert seeds[v] == list(range(s["looks"][-1]["n"]))
    assert seeds["base"] == list(range(max(lk["n"] for s in states.values() for lk in s["looks"])))
    if states["mid"]["status"] != "worse":
        assert len(states["mid"]["looks"]) == 2 or states["mid"]["status"] != "open"
    assert "adaptive looks (" in proc.stdout and "big vs base: WORSE" in proc.stdout
    report = (sweep_dir / "report.md").read_text()
    assert "## Adaptive looks" in report and "| look | seeds | test |" in report
    assert "runs saved" in report and "Adaptive looks</h2>" in (sweep_dir / "report.html").read_text()


@pytest.mark.slow
def test_interrupted_during_a_look_resumes_with_its_looks_intact(adaptive_sweep, tmp_path):
    reference, _ = adaptive_sweep
    sweep_dir = tmp_path / "sweep"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "sweeper", *ARGS, *LOCAL, f"sweeper.dir={sweep_dir}"]
    proc = subprocess.Popen(cmd, cwd=FIXTURE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (sweep_dir / "looks.json").exists():
        time.sleep(0.2)
    assert (sweep_dir / "looks.json").exists(), "look 1 was never recorded"
    look2_run = sweep_dir / "runs" / "base" / "seed_3"  # look 2's runs take >= 1 s: interrupt while they run
    while time.time() < deadline and not look2_run.exists():  # (a fixed sleep raced look 2's record on a fast box)
        time.sleep(0.05)
    assert look2_run.exists() and len(read_looks(sweep_dir)["looks"]) == 1, "look 2's runs never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    assert len(read_looks(sweep_dir)["looks"]) == 1   # look 1 kept, look 2 not recorded half-done
    again = _sweep(sweep_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    got, want = read_looks(sweep_dir), read_looks(reference)
    assert got["looks"] == want["looks"]
    assert json.dumps(got["states"], sort_keys=True) == json.dumps(want["states"], sort_keys=True)


@pytest.mark.parametrize("extra, message", [
    (["~experiment.min_effect"], "seeds=adaptive needs experiment.min_effect"),
    (["sweeper.adaptive.start=1"], "sweeper.adaptive.start=1: must be an integer >= 2"),
    (["sweeper.adaptive.max_seeds=2"], "sweeper.adaptive.max_seeds=2: must be at least sweeper.adaptive.start=3"),
    (["sweeper.adaptive.spending=linear"], "sweeper.adaptive.spending='linear': accepted values are obf, pocock, hsd"),
    (["sweeper.adaptive.batch=0"], "sweeper.adaptive.batch=0: must be a positive integer"),
])
def test_bad_adaptive_settings_are_one_line_and_exit_2(tmp_path, extra, message):
    sweep_dir = tmp_path / "never"
    real = extra == ["~experiment.min_effect"]      # one case through `python -m sweeper`, the rest in process
    res = sweeper_cli(*ARGS, *LOCAL, f"sweeper.dir={sweep_dir}", *extra, cwd=FIXTURE, real=real)
    assert res.code == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert not sweep_dir.exists() and res.started in ([], None)


@pytest.mark.slow
def test_a_changed_design_is_refused_on_resume(adaptive_sweep):
    sweep_dir, _ = adaptive_sweep
    proc = _sweep(sweep_dir, "sweeper.adaptive.max_seeds=7", timeout=120)
    assert proc.returncode == 2 and "another design (max_seeds 5 -> 7)" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_looks_decided_with_an_older_calibration_are_refused_on_resume(adaptive_sweep):
    sweep_dir, _ = adaptive_sweep
    path = sweep_dir / "looks.json"
    text = path.read_text()
    record = json.loads(text)
    assert record["calibration"] == "deciding test, calibration.npz"
    del record["calibration"]                          # what a sweep from before the recalibration recorded
    path.write_text(json.dumps(record))
    try:
        proc = _sweep(sweep_dir, timeout=120)
    finally:
        path.write_text(text)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "levels of an older sweeper" in lines[0], proc.stderr
    assert "delete that file" in lines[0]


@pytest.mark.slow
@pytest.mark.slurm
def test_adaptive_sweep_on_slurm(slurm_cluster, tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = _sweep(sweep_dir, "launcher=slurm", "launcher.gpus_per_node=0", "launcher.timeout_min=5",
                  timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = read_looks(sweep_dir)
    assert rec["states"]["big"]["status"] == "worse" and len(rec["looks"]) >= 1
    slurm = json.loads((sweep_dir / "slurm.json").read_text())
    assert len({j.get("job_id", "").split("_")[0] for j in slurm.get("jobs", {}).values()}) == len(rec["looks"])
