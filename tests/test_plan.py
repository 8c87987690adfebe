"""Plan identity: variants x seeds, stable run ids and dirs, frozen configs, the manifest, what a backend starts,
dry run, recorded-plan checks."""
import dataclasses
import sys

import pytest

from conftest import run_sweeper
from sweeper.compose import compose_sweep
from sweeper.errors import UsageError
from sweeper.plan import make_plan, reconcile, write_plan
from sweeper.resume import load_plan
from sweeper.run.rundir import MANIFEST, RunDir, Status, read_manifest, stable_hash


def plan_for(*overrides, seeds=(0, 1, 2, 3)):
    return make_plan(compose_sweep(["+experiment=rope", *overrides]), list(seeds))


def test_variants_times_seeds(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}")
    assert len(plan.runs) == 3 * 4
    assert {(r.variant, r.seed) for r in plan.runs} == {(v, s) for v in ("rope", "nope", "rope_frozen_qk")
                                                       for s in range(4)}
    assert len({r.run_id for r in plan.runs}) == 12
    assert plan.runs[0].run_dir == tmp_path.resolve() / "runs" / "rope" / "seed_0"
    assert plan.runs[0].rundir.path == plan.runs[0].run_dir and plan.runs[0].label == "rope/seed_0"


def test_same_config_and_seed_same_identity():
    a, b = plan_for(), plan_for()
    assert [(r.run_id, r.run_dir) for r in a.runs] == [(r.run_id, r.run_dir) for r in b.runs]
    assert a.sweep_dir == b.sweep_dir and a.sweep_dir.name.startswith("rope-")
    run = a.runs[0]
    assert run.run_id == f"rope-s0-{stable_hash(run.config)[:8]}" and run.config_hash == stable_hash(run.config)


def test_changed_config_or_task_changes_identity_and_default_dir():
    a, b = plan_for(), plan_for("train.lr=0.001")
    assert a.sweep_dir != b.sweep_dir
    assert not {r.run_id for r in a.runs} & {r.run_id for r in b.runs}
    sweep = compose_sweep(["+experiment=rope"])
    other = dataclasses.replace(sweep, task=dataclasses.replace(sweep.task, entry="train.other:main"))
    assert make_plan(other, [0]).sweep_dir != a.sweep_dir          # the same configs run by other code
    hooks = dataclasses.replace(sweep, task=dataclasses.replace(sweep.task, preflight=None, cwd="/"))
    assert make_plan(hooks, [0]).sweep_dir == a.sweep_dir          # hooks and cwd do not shape the numbers


def test_seeds_do_not_change_the_sweep_dir():
    assert plan_for(seeds=[0]).sweep_dir == plan_for(seeds=[0, 1, 2]).sweep_dir


def test_what_a_backend_starts(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", seeds=[0])
    run = plan.runs[0]
    assert plan.argv(run) == [sys.executable, "-m", "sweeper.run", "train:main", str(run.run_dir)]
    assert plan.run_env(run) == {"SWEEPER_RUN_DIR": str(run.run_dir)} and not plan.tensorboard
    assert run.total_steps == 33
    tb = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", "sweeper.tensorboard=true", seeds=[0])
    assert tb.tensorboard and tb.run_env(tb.runs[0]) == {"SWEEPER_RUN_DIR": str(run.run_dir),
                                                          "SWEEPER_TENSORBOARD": "1"}
    assert tb.variants_hash == plan.variants_hash          # a sweeper option, not part of any run's identity


def test_total_steps_of_other_tasks():
    spec = plan_for(seeds=[0]).runs[0]
    assert dataclasses.replace(spec, config={"seed": 0, "steps": 50}).total_steps == 50
    assert dataclasses.replace(spec, config={"seed": 0, "steps": "50"}).total_steps is None
    assert dataclasses.replace(spec, config={"seed": 0, "steps": True}).total_steps is None
    assert dataclasses.replace(spec, config={"seed": 0, "train": {"lr": 1}, "steps": 7}).total_steps == 7
    assert dataclasses.replace(spec, config={"seed": 0}).total_steps is None


def test_write_plan_freezes_resolved_configs(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", seeds=[0, 1])
    write_plan(plan, ["+experiment=rope"])
    manifest = read_manifest(tmp_path)
    assert manifest.experiment == plan.experiment and manifest.seeds == [0, 1]
    assert manifest.task == plan.task.to_dict() and manifest.task["entry"] == "train:main"
    assert manifest.argv == ["+experiment=rope"] and manifest.launcher["name"] == "local"
    assert manifest.variants_hash == plan.variants_hash and len(manifest.runs) == 6
    for entry, run in zip(manifest.runs, plan.runs):
        rd = manifest.run_dir(tmp_path, entry)
        cfg = rd.read_config()
        assert cfg == run.config and cfg["seed"] == entry.seed and cfg["train"]["steps"] == 33
        assert set(cfg) == {"seed", "model", "data", "train", "health"}
        assert stable_hash(cfg) == entry.config_hash
        status = rd.read_status()
        assert status.status is Status.PENDING and status.run_id == entry.run_id
        assert (status.experiment, status.variant, status.seed) == ("rope", entry.variant, entry.seed)
    # A second write keeps each run's status and the manifest's creation time.
    RunDir(plan.runs[0].run_dir).update_status(Status.FINISHED)
    created = manifest.created
    write_plan(plan, ["+experiment=rope"])
    assert RunDir(plan.runs[0].run_dir).state() is Status.FINISHED and read_manifest(tmp_path).created == created


def test_resume_rebuilds_the_plan_from_the_manifest_alone(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", "sweeper.tensorboard=true", seeds=[0, 1])
    write_plan(plan, ["+experiment=rope", "train.steps=33"])
    loaded, argv = load_plan(tmp_path, ["launcher.max_parallel=1"])
    assert argv == ["+experiment=rope", "train.steps=33"]
    assert loaded.task == plan.task and loaded.experiment == plan.experiment and loaded.seeds == [0, 1]
    assert [(r.run_id, r.run_dir, r.config) for r in loaded.runs] == [(r.run_id, r.run_dir, r.config)
                                                                       for r in plan.runs]
    assert loaded.tensorboard and loaded.argv(loaded.runs[0]) == plan.argv(plan.runs[0])
    assert loaded.sweep.launcher["max_parallel"] == 1 and loaded.variants_hash == plan.variants_hash


def test_recorded_plan_mismatch_is_refused_and_seeds_extend_only_when_asked(tmp_path):
    write_plan(plan_for(f"sweeper.dir={tmp_path}", seeds=[0, 1]), [])
    with pytest.raises(UsageError, match=r"different plan \(the run configs differ"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", "train.lr=0.01", seeds=[0, 1]), extend=False)
    with pytest.raises(UsageError, match="sweeper.extend=true"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", seeds=[0, 1, 2]), extend=False)
    extended = reconcile(plan_for(f"sweeper.dir={tmp_path}", seeds=[2]), extend=True)
    assert extended.seeds == [0, 1, 2] and len(extended.runs) == 9
    sweep = compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path}"])
    other = dataclasses.replace(sweep, task=dataclasses.replace(sweep.task, entry="train.other:main"))
    with pytest.raises(UsageError, match=r"different plan \(the task \(train:main -> train.other:main\) differ"):
        reconcile(make_plan(other, [0, 1]), extend=False)


def test_damaged_manifest_is_a_usage_error_naming_the_file(tmp_path):
    (tmp_path / MANIFEST).write_text('{"experiment": ')
    with pytest.raises(UsageError, match=f"^{tmp_path / MANIFEST}: the sweep manifest is not valid JSON"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", seeds=[0]), extend=False)
    with pytest.raises(UsageError, match=f"^{tmp_path / MANIFEST}: the sweep manifest is not valid JSON"):
        load_plan(tmp_path, [])
    proc = run_sweeper("+experiment=rope", "seeds=0", f"sweeper.dir={tmp_path}", "sweeper.dry_run=true")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{tmp_path / MANIFEST}: the sweep manifest is not valid JSON" in proc.stderr


def test_dry_run_prints_plan_and_launches_nothing(tmp_path):
    proc = run_sweeper("+experiment=rope", "seeds=0-1", f"sweeper.dir={tmp_path / 's'}", "sweeper.dry_run=true")
    assert proc.returncode == 0, proc.stderr
    assert "3 variants x 2 seeds" in proc.stdout and "rope_frozen_qk-s1-" in proc.stdout
    assert "task: train:main (in " in proc.stdout and "nothing launched" in proc.stdout
    assert not (tmp_path / "s").exists()
