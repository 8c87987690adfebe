"""Resources per variant: launcher.ranks_per_run and experiment.resources are typed (one line, exit 2, for an
unknown variant or key, or a value out of range), part of the plan (the dry run shows them, the manifest records
them, the sweep's identity has them once a run has more than one rank), and an older sweep dir without them
reads as 1 rank per run. Plan-time checks: the global batch splits evenly; a run never needs more GPUs than
the machine shows.

Run: ``python -m pytest -q tests/test_resources.py``
"""
import json

import pytest

from sweeper.cli.resume import load_plan
from sweeper.cli.sweep import main
from sweeper.config.sweep import compose_sweep
from sweeper.errors import UsageError
from sweeper.plan.make import make_plan, plan_hash, reconcile, write_plan
from sweeper.run.files.manifest import MANIFEST, read_manifest
from sweeper.run.files.reading import UnreadableFile

WIDE = "+experiment.resources={nope: {ranks_per_run: 2}}"


def plan_for(*overrides, seeds=(0,)):
    return make_plan(compose_sweep(["+experiment=rope", *overrides]), list(seeds))


@pytest.mark.slow
def test_the_plan_and_the_manifest_record_each_variants_ranks(tmp_path):
    plan = plan_for(WIDE, f"sweeper.dir={tmp_path}")
    assert {v: plan.ranks_of(v) for v in plan.experiment.variants} == {"rope": 1, "nope": 2, "rope_frozen_qk": 1}
    write_plan(plan, ["+experiment=rope", WIDE])
    manifest = read_manifest(tmp_path)
    assert manifest.resources["nope"] == {"ranks_per_run": 2} and manifest.resources["rope"] == {"ranks_per_run": 1}
    loaded, _ = load_plan(tmp_path, ["launcher.ranks_per_run=4"])     # the plan's ranks, whatever the launcher says
    assert loaded.ranks_of("nope") == 2 and loaded.ranks_of("rope") == 1
    every = plan_for("launcher.ranks_per_run=2")
    assert {every.ranks_of(v) for v in every.experiment.variants} == {2}


@pytest.mark.slow
def test_one_rank_plans_keep_their_identity_and_more_ranks_are_another_sweep(tmp_path):
    one, wide = plan_for(), plan_for(WIDE)
    assert one.variants_hash == plan_hash(one.task, one.sweep.variant_configs)    # as before ranks existed
    assert wide.variants_hash != one.variants_hash and wide.sweep_dir != one.sweep_dir
    assert plan_for("launcher.ranks_per_run=1").sweep_dir == one.sweep_dir
    write_plan(plan_for(f"sweeper.dir={tmp_path}"), [])
    with pytest.raises(UsageError, match=r"holds a different plan \(the ranks per run \(nope: 1 -> 2\) differ"):
        reconcile(plan_for(WIDE, f"sweeper.dir={tmp_path}"), extend=False)


@pytest.mark.slow
def test_an_old_manifest_without_resources_reads_as_one_rank_and_a_damaged_one_is_named(tmp_path):
    write_plan(plan_for(WIDE, f"sweeper.dir={tmp_path}"), [])
    d = json.loads((tmp_path / MANIFEST).read_text())
    (tmp_path / MANIFEST).write_text(json.dumps({k: v for k, v in d.items() if k != "resources"}))
    assert read_manifest(tmp_path).resources == {}
    loaded, _ = load_plan(tmp_path, [])
    assert loaded.ranks_of("nope") == 1
    for bad in ({"nope": {"ranks_per_run": 0}}, {"wide": {"ranks_per_run": 2}}, [2]):
        (tmp_path / MANIFEST).write_text(json.dumps({**d, "resources": bad}))
        with pytest.raises(UnreadableFile, match=r"resources=.* is not a mapping of variant -> \{ranks_per_run: N\}"):
            read_manifest(tmp_path)


@pytest.mark.slow
def test_the_dry_run_shows_the_ranks(tmp_path, capsys):
    assert main(["+experiment=rope", WIDE, "seeds=0", f"sweeper.dir={tmp_path}", "sweeper.dry_run=true"]) == 0
    out = capsys.readouterr().out
    assert "resources: nope 2 ranks per run, the others 1" in out
    assert "  nope                 model.pos_encoding=none  [2 ranks]" in out
    assert "thread(s) per rank (fixed by the plan)" in out


@pytest.mark.parametrize("override, line", [
    ("+experiment.resources={wide: {ranks_per_run: 2}}",
     "experiment.resources.wide: no variant 'wide' in the experiment; its variants are rope, nope, rope_frozen_qk"),
    ("+experiment.resources={nope: {gpus: 2}}",
     "unknown config key 'experiment.resources.nope.gpus'; keys of experiment.resources.nope are: ranks_per_run"),
    ("+experiment.resources={nope: {ranks_per_run: 0}}",
     "experiment.resources.nope.ranks_per_run=0: must be an integer from 1 to 64"),
    ("+experiment.resources={nope: {ranks_per_run: two}}",
     "experiment.resources.nope.ranks_per_run='two': must be an integer from 1 to 64"),
    ("+experiment.resources={nope: 2}", "experiment.resources.nope=2: expected a mapping with keys ranks_per_run"),
    ("+experiment.resources=[2]", "experiment.resources=[2]: expected a mapping of variant -> resources"),
    ("launcher.ranks_per_run=0", "launcher.ranks_per_run=0: must be an integer from 1 to 64"),
    ("launcher.ranks_per_run=65", "launcher.ranks_per_run=65: must be an integer from 1 to 64"),
    ("train.batch_size=9", "variant nope: train.batch_size=9 is not divisible by ranks_per_run=2"),
])
def test_bad_resources_are_one_line_exit_2_with_nothing_written(tmp_path, capsys, override, line):
    extra = [WIDE] if override.startswith("train.") else []
    assert main(["+experiment=rope", *extra, override, "seeds=0", f"sweeper.dir={tmp_path / 's'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0], err
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_a_dropped_variant_takes_its_resources_along(tmp_path):
    plan = plan_for(WIDE, "~experiment.variants.nope")
    assert list(plan.experiment.variants) == ["rope", "rope_frozen_qk"] and plan.resources["rope"]["ranks_per_run"] == 1


@pytest.mark.slow
def test_a_run_wider_than_the_visible_gpus_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")       # two (fake) GPUs
    assert main(["+experiment=rope", "+experiment.resources={nope: {ranks_per_run: 4}}", "seeds=0",
                 f"sweeper.dir={tmp_path / 's'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a run of 4 ranks needs 4 GPUs, one per rank" in err[0] and "2 visible (3, 5" in err[0]
    assert not (tmp_path / "s").exists()
