"""Changes by concern (check `several_concerns`, issue 45 item 6): every changed key of a variant, direct or through
a group swap, is attributed to a concern (model, optimizer, data, evaluation, budget, other); a variant that
touches more than one and is not a declared bundle is named by the one-change lint at plan time and warned beside
its verdict.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_several_concerns.py
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from sweeper.analysis.integrity.records.concerns import several_concerns, several_concerns_coverage
from sweeper.config.variants.concerns import by_concern, concern_of, swap_group
from sweeper.config.variants.config_diff import Change, Declared
from sweeper.run.files.experiment import Experiment
from tests.helpers.integrity_evidence_projects import make_project, user_env
from tests.test_integrity_evidence_checks import evidence, grid


@pytest.mark.parametrize("key, swapped, concern", [
    ("model.d_model", None, "model"),               # the group folder the key lives in
    ("net.blocks", None, "model"),
    ("optim.lr", None, "optimizer"),
    ("train.lr", None, "optimizer"),                # an unambiguous leaf, wherever it lives
    ("trainer.max_epochs", None, "budget"),
    ("optim.batch_size", None, "budget"),           # examples per step: the compute a run gets
    ("train.warmup_steps", None, "optimizer"),      # a schedule, not a budget
    ("data.val_size", None, "evaluation"),          # the evaluation data, before the data group
    ("eval_interval", None, "other"),               # when it is evaluated is not what
    ("dataset.augment", None, "data"),
    ("n_train", "dataset", "data"),                 # a root key set by the swap dataset=...
    ("dim", "dataset", "data"),                     # the swapped group before the leaf's hint
    ("dim", None, "model"),                         # the leaf's hint
    ("act", None, "model"),
    ("colour", None, "other"),
])
def test_each_key_gets_its_concern(key, swapped, concern):
    assert concern_of(key, swapped) == concern


def test_a_group_swap_is_told_from_a_key_override_and_its_keys_keep_their_own_groups():
    assert swap_group("model=big", ["model.d_model"]) == "model"
    assert swap_group("+dataset@data=other", ["n_train"]) == "dataset"
    assert swap_group("(no model=big)", ["model.d"]) == "model"
    assert swap_group("model.d_model=128", ["model.d_model"]) is None
    found = by_concern(["model.d_model", "optim.lr", "dim"],
                       [Declared("model=big", ("model.d_model", "optim.lr", "dim"))])
    assert found == {"model": [("model.d_model", "model=big"), ("dim", "model=big")],
                     "optimizer": [("optim.lr", "model=big")]}


EXP = Experiment(name="e", baseline="base", metric="val_loss", lower_is_better=True,
                 variants={"base": [], "big": ["model=big"], "wide": ["model.width=8"]})
CHANGES = {"big": [Change("model.width", 4, 8), Change("optim.lr", 0.1, 0.01)],
           "wide": [Change("model.width", 4, 8)]}
DECLARED = {"big": [Declared("model=big", ("model.width", "optim.lr"))],
            "wide": [Declared("model.width=8", ("model.width",))]}


def three_arms(tmp_path, experiment=EXP, changes=CHANGES):
    ev = evidence(grid({"base": 1.0, "big": 1.0, "wide": 1.0}, "final_val_loss", seeds=(0,)), tmp_path,
                  experiment, changes)
    ev.declared.update(DECLARED)
    return ev


def test_a_group_swap_touching_the_model_and_the_optimizer_warns_and_one_concern_does_not(tmp_path):
    [found] = several_concerns(three_arms(tmp_path))
    assert (found.check, found.variants, found.effect.value) == ("several_concerns", ("big",), "warn")
    assert found.evidence == "model: model.width (model=big); optimizer: optim.lr (model=big)"
    assert "experiment.bundles=[big]" in found.message
    cover = several_concerns_coverage(three_arms(tmp_path))
    assert cover.checked and cover.evidence == "config changes of 2 of 2 variant(s) attributed to concerns"


def test_a_declared_bundle_or_control_is_not_judged_and_unread_changes_are_not_checked(tmp_path):
    bundled = Experiment(**{**EXP.__dict__, "bundles": ["big"]})
    assert several_concerns(three_arms(tmp_path, bundled)) == []
    assert "1 declared bundle(s) not judged" in several_concerns_coverage(three_arms(tmp_path, bundled)).evidence
    cover = several_concerns_coverage(three_arms(tmp_path, changes={}))
    assert not cover.checked and cover.evidence.endswith("(their runs' config.yaml): not checked")


# -- through the real CLI ------------------------------------------------------------------------------------------

SCRIPT = '''"""A tiny run-API "training": the final hangs on the seed, the width and the learning rate."""
import random

import sweeper

run = sweeper.init()
cfg = run.config
rng = random.Random(cfg.seed)
loss = 1.0 / cfg.net.width + cfg.optim.lr + 0.01 * rng.random()
for step in range(1, 4):
    run.log(step, train_loss=loss * (4 - step))
run.finish(val_loss=loss)
'''


def project(tmp_path):
    """A project with a `net` config group whose files set an optimizer key too (a global package): big and huge
    change it, wide keeps the baseline's."""
    conf = tmp_path / "proj" / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "net").mkdir()
    (conf / "net" / "small.yaml").write_text("# @package _global_\nnet:\n  width: 4\noptim:\n  lr: 0.1\n")
    (conf / "net" / "wide.yaml").write_text("# @package _global_\nnet:\n  width: 8\noptim:\n  lr: 0.1\n")
    (conf / "net" / "big.yaml").write_text("# @package _global_\nnet:\n  width: 16\noptim:\n  lr: 0.01\n")
    (conf / "net" / "huge.yaml").write_text("# @package _global_\nnet:\n  width: 32\noptim:\n  lr: 0.02\n")
    (tmp_path / "proj" / "train_api.py").write_text(SCRIPT)
    exp = {"defaults": [{"/net": "small"}, {"override /task": "custom"}],
           "task": {"command": ["python", "train_api.py"]},
           "experiment": {"name": "tiny", "baseline": "base", "metric": "val_loss", "lower_is_better": True,
                          "variants": {"base": [], "big": ["net=big"], "wide": ["net=wide"],
                                       "huge": ["net=huge"]},
                          "bundles": ["huge"]}}
    (conf / "experiment" / "tiny.yaml").write_text("# @package _global_\n" + yaml.safe_dump(exp))
    return tmp_path / "proj"


@pytest.mark.slow
def test_a_group_swap_that_changes_two_concerns_is_named_at_plan_time_and_beside_its_verdict_api(tmp_path):
    root = project(tmp_path)
    sweep_dir = root / "sweeps" / "tiny"
    proc = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=tiny", "seeds=0-1",
                           "launcher.threads_per_run=1", "sweeper.journal=off", f"sweeper.dir={sweep_dir}"],
                          cwd=root, env=user_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lint = [ln for ln in proc.stderr.splitlines() if "several_concerns" in ln]
    assert lint == ["sweeper: warning: variant big makes one change (net=big) that touches 2 concerns "
                    "(several_concerns: model: net.width (net=big); optimizer: optim.lr (net=big)): its result "
                    "cannot say which one mattered; split it into one variant per change, or declare the bundle "
                    "with experiment.bundles=[big]"], proc.stderr
    lines = {v: ln for ln in proc.stdout.splitlines() for v in ("big", "wide", "huge") if ln.startswith(f"{v} vs ")}
    assert "warning: several_concerns: variant big changes 2 concerns at once (model, optimizer)" in lines["big"]
    assert "warning" not in lines["wide"] and "warning" not in lines["huge"], lines    # one concern; a bundle
    assert "  big: net=big (2 keys: net.width: 4 -> 16, optim.lr: 0.1 -> 0.01)  (2 concerns: model, " \
           "optimizer)" in proc.stdout
    md = (sweep_dir / "report.md").read_text()
    assert "| big | net=big | `optim.lr` | optimizer | `0.1` | `0.01` |" in md
    record = json.loads((sweep_dir / "integrity.json").read_text())
    assert [(f["check"], f["variants"]) for f in record["findings"]] == [("several_concerns", ["big"])]
    summary = (sweep_dir / "summary.csv").read_text()
    assert "integrity_warnings" in summary.splitlines()[0] and "several_concerns" in summary


@pytest.mark.slow
def test_a_plain_script_group_swap_of_budget_and_model_is_refused_under_one_change_error_command(tmp_path):
    """A command project; `setup=short` (a group of no known concern) sets steps and width: budget and model."""
    project = make_project(tmp_path, "command", variants={"base": [], "short": ["+setup=short"]})
    (project / "conf" / "setup").mkdir()
    (project / "conf" / "setup" / "short.yaml").write_text("# @package _global_\nsteps: 3\nwidth: 8\n")
    sweep_dir = project / "sweeps" / "tiny"
    base = [sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=tiny", "seeds=0",
            f"sweeper.dir={sweep_dir}"]
    dry = subprocess.run(base + ["sweeper.dry_run=true"], cwd=project, env=user_env(), capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "variant short makes one change (+setup=short) that touches 2 concerns (several_concerns: model: width " \
           "(+setup=short); budget: steps (+setup=short))" in dry.stderr, dry.stderr
    refused = subprocess.run(base + ["sweeper.one_change=error"], cwd=project, env=user_env(), capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.endswith("experiment.bundles=[short] (sweeper.one_change=error)\n")
    assert not sweep_dir.exists() and refused.stdout == ""
