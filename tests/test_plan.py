"""Plan identity: variants x seeds, stable run ids and dirs, frozen configs, the manifest, what a backend starts,
dry run, recorded-plan checks."""
import dataclasses
import re
import sys

import pytest

from sweeper.cli.resume import load_plan
from sweeper.config.seeds import Seeds
from sweeper.config.sweep import compose_sweep
from sweeper.errors import UsageError
from sweeper.plan.make import make_plan, reconcile, write_plan
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.manifest import MANIFEST, read_manifest
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.commands import run_sweeper


def plan_for(*overrides, seeds=(0, 1, 2, 3)):
    return make_plan(compose_sweep(["+experiment=rope", *overrides]), list(seeds))


@pytest.mark.slow
def test_variants_times_seeds(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}")
    assert len(plan.runs) == 3 * 4
    assert {(r.variant, r.seed) for r in plan.runs} == {(v, s) for v in ("rope", "nope", "rope_frozen_qk")
                                                       for s in range(4)}
    assert len({r.run_id for r in plan.runs}) == 12
    assert plan.runs[0].run_dir == tmp_path.resolve() / "runs" / "rope" / "seed_0"
    assert plan.runs[0].rundir.path == plan.runs[0].run_dir and plan.runs[0].label == "rope/seed_0"


@pytest.mark.slow
def test_same_config_and_seed_same_identity():
    a, b = plan_for(), plan_for()
    assert [(r.run_id, r.run_dir) for r in a.runs] == [(r.run_id, r.run_dir) for r in b.runs]
    assert a.sweep_dir == b.sweep_dir and a.sweep_dir.name.startswith("rope-")
    run = a.runs[0]
    assert run.run_id == f"rope-s0-{stable_hash(run.config)[:8]}" and run.config_hash == stable_hash(run.config)


@pytest.mark.slow
def test_changed_config_or_task_changes_identity_and_default_dir():
    a, b = plan_for(), plan_for("train.lr=0.001")
    assert a.sweep_dir != b.sweep_dir
    assert not {r.run_id for r in a.runs} & {r.run_id for r in b.runs}
    sweep = compose_sweep(["+experiment=rope"])
    other = dataclasses.replace(sweep, task=dataclasses.replace(sweep.task, entry="train.other:main"))
    assert make_plan(other, [0]).sweep_dir != a.sweep_dir          # the same configs run by other code
    hooks = dataclasses.replace(sweep, task=dataclasses.replace(sweep.task, preflight=None, cwd="/"))
    assert make_plan(hooks, [0]).sweep_dir == a.sweep_dir          # hooks and cwd do not shape the numbers


@pytest.mark.slow
def test_seeds_do_not_change_the_sweep_dir():
    assert plan_for(seeds=[0]).sweep_dir == plan_for(seeds=[0, 1, 2]).sweep_dir


@pytest.mark.slow
def test_what_a_backend_starts(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", seeds=[0])
    run = plan.runs[0]
    assert plan.argv(run) == [sys.executable, "-m", "sweeper.run", "sweeper.train:main", str(run.run_dir)]
    assert plan.run_env(run) == {"SWEEPER_RUN_DIR": str(run.run_dir)} and not plan.tensorboard
    assert run.total_steps == 33
    tb = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", "sweeper.tensorboard=true", seeds=[0])
    assert tb.tensorboard and tb.run_env(tb.runs[0]) == {"SWEEPER_RUN_DIR": str(run.run_dir),
                                                          "SWEEPER_TENSORBOARD": "1"}
    assert tb.variants_hash == plan.variants_hash          # a sweeper option, not part of any run's identity


@pytest.mark.slow
def test_total_steps_of_other_tasks():
    spec = plan_for(seeds=[0]).runs[0]
    assert dataclasses.replace(spec, config={"seed": 0, "steps": 50}).total_steps == 50
    assert dataclasses.replace(spec, config={"seed": 0, "steps": "50"}).total_steps is None
    assert dataclasses.replace(spec, config={"seed": 0, "steps": True}).total_steps is None
    assert dataclasses.replace(spec, config={"seed": 0, "train": {"lr": 1}, "steps": 7}).total_steps == 7
    assert dataclasses.replace(spec, config={"seed": 0}).total_steps is None


@pytest.mark.slow
def test_write_plan_freezes_resolved_configs(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", "train.steps=33", seeds=[0, 1])
    write_plan(plan, ["+experiment=rope"])
    manifest = read_manifest(tmp_path)
    assert manifest.experiment == plan.experiment and manifest.seeds == [0, 1]
    assert manifest.task == plan.task.to_dict() and manifest.task["entry"] == "sweeper.train:main"
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    with pytest.raises(
        UsageError, match=r"different plan \(the task \(sweeper.train:main -> train.other:main\) differ"
    ):
        reconcile(make_plan(other, [0, 1]), extend=False)


@pytest.mark.slow
def test_damaged_manifest_is_a_usage_error_naming_the_file(tmp_path):
    (tmp_path / MANIFEST).write_text('{"experiment": ')
    with pytest.raises(UsageError, match=f"^{tmp_path / MANIFEST}: the sweep manifest is not valid JSON"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", seeds=[0]), extend=False)
    with pytest.raises(UsageError, match=f"^{tmp_path / MANIFEST}: the sweep manifest is not valid JSON"):
        load_plan(tmp_path, [])
    proc = run_sweeper("+experiment=rope", "seeds=0", f"sweeper.dir={tmp_path}", "sweeper.dry_run=true")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{tmp_path / MANIFEST}: the sweep manifest is not valid JSON" in proc.stderr


@pytest.mark.slow
def test_dry_run_prints_plan_and_launches_nothing(tmp_path):
    proc = run_sweeper("+experiment=rope", "seeds=0-1", f"sweeper.dir={tmp_path / 's'}", "sweeper.dry_run=true")
    assert proc.returncode == 0, proc.stderr
    assert "3 variants x 2 seeds" in proc.stdout and "rope_frozen_qk-s1-" in proc.stdout
    assert "task: sweeper.train:main (in " in proc.stdout and "nothing launched" in proc.stdout
    assert not (tmp_path / "s").exists()


# -- issue 11 item 6: a variant's own seeds= override ---------------------------------------------------------

NOPE_OWN_SEEDS = "experiment.variants.nope=['model.pos_encoding=none','seeds=[5,7]']"


@pytest.mark.slow
def test_a_variants_own_seeds_are_its_runs_and_are_recorded(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", NOPE_OWN_SEEDS, seeds=[0, 1])
    assert [(r.variant, r.seed) for r in plan.runs] == [
        ("rope", 0),
        ("rope", 1),
        ("nope", 5),
        ("nope", 7),
        ("rope_frozen_qk", 0),
        ("rope_frozen_qk", 1),
    ]
    assert (
        plan.variant_seeds == {"nope": [5, 7]} and plan.seeds_of("nope") == [5, 7] and plan.seeds_of("rope") == [0, 1]
    )
    write_plan(plan, [])
    manifest = read_manifest(tmp_path)
    assert manifest.seeds == [0, 1] and manifest.variant_seeds == {"nope": [5, 7]}
    assert manifest.seeds_of("nope") == [5, 7] and manifest.seeds_of("rope_frozen_qk") == [0, 1]
    loaded, _ = load_plan(tmp_path, [])
    assert loaded.variant_seeds == {"nope": [5, 7]} and [r.run_id for r in loaded.runs] == [r.run_id for r in plan.runs]
    assert loaded.sweep.seeds == Seeds.of([0, 1])                    # the recorded seeds as the typed value
    assert loaded.sweep.variant_seeds == {"rope": None, "nope": Seeds.of([5, 7]), "rope_frozen_qk": None}
    # The same command again is the same plan; more seeds for the variant need sweeper.extend=true.
    assert reconcile(plan_for(f"sweeper.dir={tmp_path}", NOPE_OWN_SEEDS, seeds=[0, 1]), extend=False).runs == plan.runs
    more = "experiment.variants.nope=['model.pos_encoding=none','seeds=[5,7,9]']"
    with pytest.raises(UsageError, match=r"fewer seeds \(nope: seeds \[5,7\] -> \+9\)\. Add sweeper.extend=true"):
        reconcile(plan_for(f"sweeper.dir={tmp_path}", more, seeds=[0, 1]), extend=False)
    extended = reconcile(plan_for(f"sweeper.dir={tmp_path}", more, seeds=[0, 1]), extend=True)
    assert extended.seeds_of("nope") == [5, 7, 9] and extended.seeds_of("rope") == [0, 1] and len(extended.runs) == 7


@pytest.mark.slow
def test_format_plan_names_a_variants_own_seeds(tmp_path):
    proc = run_sweeper(
        "+experiment=rope", "seeds=0-1", NOPE_OWN_SEEDS, f"sweeper.dir={tmp_path / 's'}", "sweeper.dry_run=true"
    )
    assert proc.returncode == 0, proc.stderr
    assert "nope-s5-" in proc.stdout and "nope-s7-" in proc.stdout and "nope-s0-" not in proc.stdout
    assert "[seeds [5,7]]" in proc.stdout and "= 6 runs" in proc.stdout


# -- issue 11 item 4: a bound on the plan's size ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("seeds, runs", [("0-100000", 300003), ("0-1000000000000", 3000000000003), ("0-333", 1002)])
def test_a_plan_above_max_runs_is_refused_before_anything_is_written(tmp_path, seeds, runs):
    proc = run_sweeper("+experiment=rope", f"seeds={seeds}", f"sweeper.dir={tmp_path / 's'}", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"sweeper: error: the plan has {runs} runs (3 variants x {runs // 3} seeds), more than sweeper.max_runs=1000; "
        f"ask for fewer seeds (e.g. seeds=0-3) or variants, or raise the limit with sweeper.max_runs={runs}"
    ]
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_max_runs_in_process_counts_variants_own_seeds(tmp_path):
    sweep = compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path}", NOPE_OWN_SEEDS, "sweeper.max_runs=3"])
    with pytest.raises(
        UsageError,
        match=r"^the plan has 4 runs \(rope: 1 \+ nope: 2 \+ rope_frozen_qk: 1\), "
        r"more than sweeper.max_runs=3",
    ):
        make_plan(sweep, [0])
    sweep = compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path}", NOPE_OWN_SEEDS, "sweeper.max_runs=4"])
    assert len(make_plan(sweep, [0]).runs) == 4  # 1 + 2 + 1
    for bad in ("0", "-3", "true", "many", "2.5"):  # the schema refuses them as the command line gives them
        with pytest.raises(UsageError, match=r"^sweeper.max_runs=.*: (must be a positive integer|expected an integer)"):
            compose_sweep(["+experiment=rope", f"sweeper.dir={tmp_path}", f"sweeper.max_runs={bad}"])


# -- issue 11 item 1: launch settings are fixed by the first plan -------------------------------------------------


@pytest.mark.slow
def test_launch_settings_are_recorded_once_and_kept(tmp_path):
    from sweeper.plan.make import keep_recorded_launch
    from sweeper.run.files.manifest import Launch

    plan = keep_recorded_launch(plan_for(f"sweeper.dir={tmp_path}", seeds=[0]), Launch(threads_per_run=1))
    assert plan.launch == Launch(1) and plan.notes == []
    write_plan(plan, [])
    assert read_manifest(tmp_path).launch == Launch(threads_per_run=1)
    again = keep_recorded_launch(plan_for(f"sweeper.dir={tmp_path}", seeds=[0]), Launch(threads_per_run=2))
    assert again.launch == Launch(1)
    assert again.notes == [
        f"kept the launch settings recorded in {tmp_path.name}: threads_per_run=1 (this command: "
        f"2); a run's numbers depend on them, so every run of a sweep gets the same (start a new "
        f"sweeper.dir for other settings)"
    ]
    loaded, _ = load_plan(tmp_path, ["launcher.threads_per_run=2"])
    assert loaded.launch == Launch(1)


def test_local_launch_settings_come_from_the_full_plan():
    from sweeper.backends.local.backend import launch_settings
    from sweeper.backends.local.schema import LocalLauncherConf

    cfg = (
        LocalLauncherConf.from_dict({"cpu_only": True, "cores": [0, 1]})
        if len(__import__("os").sched_getaffinity(0)) > 1
        else pytest.skip("needs 2 cores")
    )
    assert launch_settings(cfg, 12).threads_per_run == 1  # 2 slots of 1 core
    assert launch_settings(cfg, 1).threads_per_run == 2  # a 1-run plan: one slot of both cores
    pinned = LocalLauncherConf.from_dict({"cpu_only": True, "threads_per_run": 2})
    assert launch_settings(pinned, 1).threads_per_run == 2
    above = LocalLauncherConf.from_dict({"cpu_only": True, "cores": [0, 1], "threads_per_run": 3})
    with pytest.raises(UsageError, match=r"launcher.threads_per_run=3: more threads than the 2 core\(s\)"):
        launch_settings(above, 1)


@pytest.mark.slow
def test_damaged_launch_record_names_the_file(tmp_path):
    import json

    write_plan(plan_for(f"sweeper.dir={tmp_path}", seeds=[0]), [])
    d = json.loads((tmp_path / MANIFEST).read_text())
    for bad, why in (
        ({"threads_per_run": 0}, "launch.threads_per_run=0 is not a positive integer"),
        ({"threads": 1}, "launch has unknown key(s) threads"),
        ([1], "launch=[1] is not a JSON object"),
    ):
        (tmp_path / MANIFEST).write_text(json.dumps({**d, "launch": bad}))
        from sweeper.run.files.reading import UnreadableFile

        with pytest.raises(UnreadableFile, match=rf"^{tmp_path / MANIFEST}: {re.escape(why)}"):
            read_manifest(tmp_path)


# -- issue 11 item 3 (and a cut-short write): the plan write completes -------------------------------------------


@pytest.mark.slow
def test_a_plan_write_cut_short_is_completed_and_another_plans_started_run_is_refused(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", seeds=[0, 1])
    # A write killed after two runs: configs there, no manifest.
    for run in plan.runs[:2]:
        run.rundir.write_config(run.config)
    other = plan_for(f"sweeper.dir={tmp_path}", "train.lr=0.01", seeds=[0, 1])
    write_plan(other, [])  # no run had started: the other command's plan replaces the configs
    assert plan.runs[0].rundir.read_config() == other.runs[0].config and read_manifest(tmp_path) is not None
    (tmp_path / MANIFEST).unlink()
    other.runs[0].rundir.append_metrics({"step": 1, "train_loss": 1.0})  # it started: never overwritten
    with pytest.raises(UsageError, match=r"config.yaml holds another run config than this plan's"):
        write_plan(plan, [])
    assert other.runs[0].rundir.read_config() == other.runs[0].config


@pytest.mark.slow
def test_resume_of_a_plan_write_cut_short_says_to_run_the_command_again(tmp_path):
    plan = plan_for(f"sweeper.dir={tmp_path}", seeds=[0])
    plan.runs[0].rundir.write_config(plan.runs[0].config)  # killed before the manifest
    with pytest.raises(
        UsageError,
        match=rf"^{tmp_path}: no {MANIFEST} yet: the sweeper that planned it was stopped "
        r"while it wrote the plan; run the command that started it again",
    ):
        load_plan(tmp_path, [])
