"""Plan identity: variants x seeds, stable run ids and dirs, frozen configs, dry run, recorded-plan checks."""
import json

import pytest
import yaml

from conftest import run_sweeper
from sweeper.compose import compose_sweep
from sweeper.errors import UsageError
from sweeper.plan import make_plan, reconcile, write_plan


def plan_for(*overrides, seeds=(0, 1, 2, 3)):
    return make_plan(compose_sweep(["+experiment=rope", *overrides]), list(seeds))


def test_variants_times_seeds(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}")
    assert len(plan.runs) == 3 * 4
    assert {(r.variant, r.seed) for r in plan.runs} == {(v, s) for v in ("rope", "nope", "rope_frozen_qk")
                                                       for s in range(4)}
    assert len({r.run_id for r in plan.runs}) == 12
    assert plan.runs[0].run_dir == tmp_path.resolve() / "runs" / "rope" / "seed_0"


def test_same_config_and_seed_same_identity():
    a, b = plan_for(), plan_for()
    assert [(r.run_id, r.run_dir) for r in a.runs] == [(r.run_id, r.run_dir) for r in b.runs]
    assert a.sweep_dir == b.sweep_dir and a.sweep_dir.name.startswith("rope-")


def test_changed_config_changes_identity_and_default_dir():
    a, b = plan_for(), plan_for("train.lr=0.001")
    assert a.sweep_dir != b.sweep_dir
    assert not {r.run_id for r in a.runs} & {r.run_id for r in b.runs}


def test_seeds_do_not_change_the_sweep_dir():
    assert plan_for(seeds=[0]).sweep_dir == plan_for(seeds=[0, 1, 2]).sweep_dir


def test_write_plan_freezes_resolved_configs(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", seeds=[0, 1])
    write_plan(plan, ["+experiment=rope"])
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert manifest["experiment"]["baseline"] == "rope" and manifest["seeds"] == [0, 1]
    assert len(manifest["runs"]) == 6
    for entry in manifest["runs"]:
        cfg = yaml.safe_load((tmp_path / entry["run_dir"] / "config.yaml").read_text())
        assert cfg["seed"] == entry["seed"] and cfg["variant"] == entry["variant"]
        assert cfg["train"]["steps"] == 33
        status = json.loads((tmp_path / entry["run_dir"] / "status.json").read_text())
        assert status["status"] == "pending" and status["run_id"] == entry["run_id"]


def test_recorded_plan_mismatch_is_refused_and_seeds_extend_only_when_asked(tmp_path):
    write_plan(plan_for(f"sweeper.dir={tmp_path}", seeds=[0, 1]), [])
    with pytest.raises(UsageError, match="different plan"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", "train.lr=0.01", seeds=[0, 1]), extend=False)
    with pytest.raises(UsageError, match="sweeper.extend=true"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", seeds=[0, 1, 2]), extend=False)
    extended = reconcile(plan_for(f"sweeper.dir={tmp_path}", seeds=[2]), extend=True)
    assert extended.seeds == [0, 1, 2] and len(extended.runs) == 9


def test_dry_run_prints_plan_and_launches_nothing(tmp_path):
    proc = run_sweeper("+experiment=rope", "seeds=0-1", f"sweeper.dir={tmp_path / 's'}", "sweeper.dry_run=true")
    assert proc.returncode == 0, proc.stderr
    assert "3 variants x 2 seeds" in proc.stdout and "rope_frozen_qk-s1-" in proc.stdout
    assert "nothing launched" in proc.stdout
    assert not (tmp_path / "s").exists()
