"""The resume audit: "bitwise identical" on the real model, and the first step and tensor of a planted divergence.

    python -m pytest -q tests/test_audit.py

Every audit runs three real `python -m sweeper.train` processes (straight; stopped or killed at k; resumed). The planted
divergences use the test-only switch SWEEPER_FAULT_DROP_RNG_STATE (sweeper/run/streams.py), which leaves one state out
of every checkpoint: the audit must name that state at step k+1, the first step after the resume.
"""
from __future__ import annotations

import json

import pytest

from sweeper.cli.audit import main as audit_main
from sweeper.execute.audit import preflight_audit
from sweeper.run.files.rundir import RunDir
from sweeper.train.audit import AuditReport, audit_resume, compare_trails, default_stop_at
from tests.helpers.commands import TINY, run_sweeper
from tests.helpers.train_runs import tiny_config


@pytest.mark.slow
def test_audit_kill_mode_is_identical_and_replays_steps(tmp_path):
    report = audit_resume(tiny_config(**{"train.steps": 20}), tmp_path, stop_at=12, mode="kill")
    assert report.identical, report.format()
    assert report.resumed_from == "step_00000010.pt", "killed after step 12: resumes from the step-10 checkpoint"
    assert report.compared_steps == 20 and report.compared_names > 40 and report.compared_metrics == 4
    trail = (tmp_path / "resumed" / "trail.jsonl").read_text().splitlines()
    resumed = [json.loads(line)["step"] for line in trail]
    assert resumed.count(11) == 2 and resumed.count(12) == 2, "steps 11-12 were trained twice and both compared"
    assert "result: bitwise identical" in report.format()
    assert json.loads((tmp_path / "audit.json").read_text())["identical"] is True


@pytest.mark.slow
def test_audit_pinpoints_a_data_order_state_left_out(tmp_path):
    report = audit_resume(tiny_config(**{"train.steps": 16}), tmp_path, stop_at=9, drop_rng_state="data_order")
    assert not report.identical
    assert (report.first_step, report.first_name) == (10, "data/batch"), report.format()
    assert "data/order_state" in report.differing and "param/tok_emb.weight" in report.differing
    assert "DIVERGED at step 10: first differing data/batch" in report.format()
    log = (tmp_path / "resumed" / "stdout.log").read_text()
    assert "fault injection SWEEPER_FAULT_DROP_RNG_STATE=data_order" in log, "the switch must be loud"


@pytest.mark.slow
def test_audit_pinpoints_the_dropout_rng_stream_left_out(tmp_path):
    cfg = tiny_config(**{"train.steps": 16, "model.dropout": 0.1})
    report = audit_resume(cfg, tmp_path, stop_at=7, drop_rng_state="torch")
    assert not report.identical
    assert (report.first_step, report.first_name) == (8, "rng/torch"), report.format()
    assert "data/batch" not in report.differing, "the data order was restored; only the dropout masks differ"
    assert any(name.startswith("param/") for name in report.differing)


@pytest.mark.slow
def test_cli_real_default_model_is_bitwise_identical(tmp_path):
    """The default model (d_model 128, 2 layers, RoPE through kernels.apply_rope) as the sweep CLI composes it."""
    out = tmp_path / "audit"
    r = run_sweeper("+experiment=rope", "train.steps=12", "train.ckpt_interval=5", "train.batch_size=8",
                    "data.n_files=8", "health.preflight=false", "--stop-at", "7", "--dir", str(out),
                    module="sweeper.audit")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: bitwise identical" in r.stdout and "stopped after step 7" in r.stdout
    assert "resumed from step_00000007.pt" in r.stdout
    resumed = RunDir(out / "resumed")
    run_cfg = resumed.read_config()
    assert run_cfg["model"]["d_model"] == 128 and run_cfg["model"]["pos_encoding"] == "rope"
    assert run_cfg["seed"] == 0 and resumed.read_status().variant == "rope"   # the identity is the run's


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["--stop-at", "12", "train.steps=12"], "stop_at=12"),
    (["--variant", "bogus"], "variant bogus"),
    (["--mode", "pause"], "--mode"),
    (["--frobnicate"], "unknown option --frobnicate"),
    (["train.stepz=3"], "train.stepz"),
    (["--steps", "50", "train.steps=12"], "steps=50"),
])
def test_cli_bad_input_is_one_line_exit_2_before_anything_runs(tmp_path, capsys, args, needle):
    out = tmp_path / "audit"
    assert audit_main(["+experiment=rope", "--dir", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("sweeper.audit: error:") and needle in err, err
    assert not out.exists(), "nothing is written for bad input"


@pytest.mark.slow
def test_sweep_preflight_audits_the_baseline(tmp_path):
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan

    tiny_overrides = [o for o in TINY if not o.startswith(("train.steps=", "train.ckpt_interval="))]
    tiny_overrides += ["train.steps=10", "train.ckpt_interval=4"]
    sweep = compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path / 'sweep'}", *tiny_overrides])
    plan = make_plan(sweep, seeds=[2, 3])
    lines: list[str] = []
    report = preflight_audit(plan, log=lines.append)
    assert report.identical, "\n".join(lines)
    assert report.label == "(rope/rope, seed 2)" and report.steps == 10 and report.stop_at == 5
    assert (plan.sweep_dir / "audit" / "audit.json").exists()
    assert lines[0].startswith("resume audit of rope/seed_2") and "bitwise identical" in lines[-1]


# ---- the comparison itself, on synthetic trails (no processes) ----

def _trail(n: int, **changed) -> list[dict]:
    rows = [{"step": s, "hashes": {"data/batch": f"b{s}", "rng/torch": f"r{s}", "param/w": f"w{s}"}} for s in
            range(1, n + 1)]
    for key, step in changed.items():
        for row in rows:
            if row["step"] >= step:
                row["hashes"][key.replace("__", "/")] = "X"
    return rows


def test_compare_trails_reports_the_earliest_step_even_in_a_replayed_segment():
    report = AuditReport(identical=True, steps=6, stop_at=4, mode="kill", work_dir=".")
    resumed = _trail(4) + _trail(6, param__w=4)[2:]   # steps 1-4, then 3-6 replayed; w differs from step 4 on
    compare_trails(_trail(6), resumed, 6, report)
    assert (report.identical, report.first_step, report.first_name) == (False, 4, "param/w")
    clean = AuditReport(identical=True, steps=6, stop_at=4, mode="kill", work_dir=".")
    compare_trails(_trail(6), _trail(4) + _trail(6)[2:], 6, clean)
    assert clean.identical and clean.compared_names == 3


def test_default_stop_at_avoids_checkpoint_steps():
    assert default_stop_at(30, 5) == 16 and default_stop_at(30, 7) == 15 and default_stop_at(100, 50) == 51
    assert default_stop_at(2, 1) == 1 and default_stop_at(20, 0) == 10
