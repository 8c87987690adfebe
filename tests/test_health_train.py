"""Health in our own training runs: the rope_frozen_qk variant is caught although its loss falls, NaN runs end
"diverged" with their step and last good checkpoint, a resumed run keeps its health record, and the sweep's
preflight mode (train.preflight.preflight_config, the task's preflight hook) judges every variant of experiment=rope.

    python -m pytest -q tests/test_health_train.py
"""
from __future__ import annotations

import copy
import json
import warnings

import pytest
import torch
import yaml

import sweeper.train as train
from sweeper.health import HealthReport
from sweeper.train.preflight import preflight_config
from tests.helpers.commands import ROOT
from tests.helpers.train_runs import make_run_dir, tiny_config
from tests.helpers.train_runs import train as train_process

ROPE_VARIANTS = yaml.safe_load((ROOT / "conf/experiment/rope.yaml").read_text())["experiment"]["variants"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True, scope="module")
def _quiet_fault_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*DELIBERATE FAULT INJECTION.*")
        yield


def variant_config(variant: str, **dotted) -> dict:
    """The tiny run config of an experiment=rope variant: its overrides as written in conf/experiment/rope.yaml."""
    overrides = dict(o.split("=", 1) for o in ROPE_VARIANTS[variant])
    return tiny_config(0, **{"health.preflight": True, **overrides, **dotted})


def metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_rope_frozen_qk_run_is_caught_though_its_loss_falls(tmp_path):
    summary = train.run(variant_config("rope_frozen_qk"), tmp_path / "frozen")
    assert summary["status"] == "finished"
    lines = metrics(tmp_path / "frozen")
    assert lines[-1]["train_loss"] < 0.85 * lines[0]["train_loss"]          # the loss is fooled
    report = HealthReport.read(tmp_path / "frozen" / "health.json")
    assert report.verdict == "fail"
    flow = report["gradient_flow"]
    assert flow.status == "fail" and flow.value == 2
    assert "blocks.0.attn.q_proj.weight: gradient exactly zero" in flow.message
    assert "blocks.0.attn.k_proj.weight: gradient exactly zero" in flow.message
    assert report["kernel_agreement"].status == "fail"
    # the live monitor sees it too: Wq/Wk layers get exactly zero gradient at every logged interval
    logged = [r for r in lines if "health/layer_grad_norm" in r]
    assert len(logged) == 3 and all(r["health/layer_grad_norm"]["blocks.0.attn.q_proj"] == 0.0 for r in logged)
    assert all(r["health/layer_grad_norm"]["blocks.0.attn.v_proj"] > 0 for r in logged)


@pytest.mark.slow
def test_healthy_rope_run_passes_with_monitor_metrics_at_the_interval(tmp_path):
    train.run(variant_config("rope"), tmp_path / "rope")
    report = HealthReport.read(tmp_path / "rope" / "health.json")
    assert report.verdict == "pass", str(report)
    lines = metrics(tmp_path / "rope")
    steps = [r["step"] for r in lines if "health/loss_ema" in r]
    assert steps == [10, 20, 30]                                            # health.interval: 10
    for r in lines:
        if "health/layer_update_ratio" in r:
            assert 0 < r["health/update_ratio_max"] < 0.3
            assert set(r["health/layer_update_ratio"]) >= {"blocks.0.attn.q_proj", "head", "tok_emb"}


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(ROPE_VARIANTS))
def test_sweep_preflight_mode_judges_each_variant(variant):
    report = preflight_config(variant_config(variant))
    if variant == "rope_frozen_qk":
        assert [c.name for c in report.failures] == ["gradient_flow", "kernel_agreement"]
        assert "blocks.0.attn.q_proj.weight: gradient exactly zero" in report["gradient_flow"].message
    else:
        assert report.verdict == "pass", str(report)
        assert report["kernel_agreement"].status == ("pass" if variant == "rope" else "skip")


@pytest.mark.slow
def test_preflight_config_leaves_the_callers_rng_alone():
    state = torch.get_rng_state()
    preflight_config(variant_config("nope"))
    assert torch.equal(state, torch.get_rng_state())


def test_nan_run_is_diverged_with_step_and_last_good_checkpoint(tmp_path):
    summary = train.run(tiny_config(0, **{"train.lr": 100.0}), tmp_path / "nan")   # AdamW at lr 100 blows up
    status = json.loads((tmp_path / "nan" / "status.json").read_text())
    assert summary["status"] == status["status"] == "diverged"
    finite = HealthReport.read(tmp_path / "nan" / "health.json")["finite"]
    assert finite.status == "fail" and finite.value == status["diverged_at_step"]
    assert finite.details["last_good_checkpoint"] == status["last_good_checkpoint"] > 0
    assert finite.message.endswith(f"last good checkpoint: step {status['last_good_checkpoint']}")
    assert (tmp_path / "nan" / "ckpt" / f"step_{status['last_good_checkpoint']:08d}.pt").exists()


@pytest.mark.slow
def test_resumed_run_writes_the_same_health_as_an_uninterrupted_one(tmp_path):
    cfg = variant_config("rope_frozen_qk")
    whole = make_run_dir(tmp_path / "whole", cfg)
    resumed = make_run_dir(tmp_path / "resumed", copy.deepcopy(cfg))
    assert train_process(whole) == 0
    assert train_process(resumed, SWEEPER_AUDIT_STOP_AT_STEP="12") == 75            # stopped with a checkpoint
    assert HealthReport.read(resumed / "health.json")["gradient_flow"].status == "fail"   # written at start
    assert train_process(resumed) == 0
    assert "resumed from" in (resumed / "stdout.log").read_text()
    def same(path):        # the memory check's figures are the process's (peak RSS), not the run's: status only
        d = json.loads(path.read_text())
        d["checks"] = [{"name": c["name"], "status": c["status"]} if c["name"] == "memory" else c for c in d["checks"]]
        return d
    assert same(resumed / "health.json") == same(whole / "health.json")
