"""Health in a sweep: the sweep preflight stops a failing variant; in-run failures are printed as they happen
and shown per variant in the report."""
import json

import pytest

from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.commands import TINY, run_sweeper

pytestmark = pytest.mark.slow
SMALL = [o for o in TINY if not o.startswith(("health.preflight", "model.d_model", "model.n_layers"))]


def test_preflight_stop_keeps_failing_variant_from_launching(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = run_sweeper("+experiment=rope", "seeds=0", "~experiment.variants.nope", *SMALL, "health.preflight=false",
                       "sweeper.preflight=stop", f"sweeper.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "preflight rope: PASS" in out
    assert "preflight rope_frozen_qk: FAIL" in out and "blocks.0.attn.q_proj.weight: gradient exactly zero" in out
    assert "start  rope_frozen_qk" not in out and "start  rope/seed_0" in out
    stopped = RunDir(sweep_dir / "runs" / "rope_frozen_qk" / "seed_0")
    status = stopped.read_status()
    assert status.status is Status.FAILED and "sweep preflight failed (gradient_flow" in status.error
    assert (status.experiment, status.variant, status.seed) == ("rope", "rope_frozen_qk", 0)
    assert not stopped.metrics_path.exists() and not stopped.log_path.exists()
    assert RunDir(sweep_dir / "runs" / "rope" / "seed_0").state() is Status.FINISHED
    report = json.loads((sweep_dir / "preflight" / "rope_frozen_qk.json").read_text())
    assert report["verdict"] == "fail"


@pytest.mark.parametrize("args, needle", [
    (["sweeper.preflight=maybe"], "sweeper.preflight='maybe': accepted values are off, warn, stop"),
    (["sweeper.preflight=warn", "task.preflight=null"], "sweeper.preflight=warn needs the task's preflight hook"),
    (["sweeper.preflight=stop", "task.preflight=train.nosuch:check"],
     "task.preflight='train.nosuch:check': module train.nosuch does not import"),
])
def test_bad_preflight_options_are_refused_at_plan_time(tmp_path, args, needle):
    proc = run_sweeper("+experiment=rope", *args, f"sweeper.dir={tmp_path / 's'}")
    assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "s").exists()


def test_in_run_health_failure_is_printed_and_reported(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = run_sweeper("+experiment=rope", "seeds=0", "~experiment.variants.nope", *SMALL, "health.preflight=true",
                       f"sweeper.dir={sweep_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    flagged = [l for l in lines if l.split("] ", 1)[-1].startswith("HEALTH FAIL rope_frozen_qk/seed_0: gradient_flow")]
    assert flagged and "k_proj.weight: gradient exactly zero" in flagged[0]
    assert not any("HEALTH FAIL rope/seed_0" in l for l in lines)        # no false alarm on the healthy baseline
    health = json.loads((sweep_dir / "runs" / "rope_frozen_qk" / "seed_0" / "health.json").read_text())
    assert health["verdict"] == "fail"
    assert json.loads((sweep_dir / "runs" / "rope" / "seed_0" / "health.json").read_text())["verdict"] != "fail"
    table_row = next(l for l in lines if l.startswith("rope_frozen_qk ") and "vs rope" in l)
    assert table_row.split()[-1] == "1/1" and "FAIL" in table_row  # the decision table shows health per variant;
    #                                                                the line below names the failed checks
    assert any(l.startswith("health: rope_frozen_qk FAILED gradient_flow") for l in lines)
    report = (sweep_dir / "report.md").read_text()
    row = next(l for l in report.splitlines() if l.startswith("| rope_frozen_qk |") and "fail" in l)
    assert "fail" in row
