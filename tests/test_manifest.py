"""The manifest's experiment is the one experiment type: what the config layer builds from experiment.* is what
sweep.json gives back, and an older manifest still reads, its missing keys mapped by the reader.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_manifest.py
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from sweeper.analysis.analyze import analyze_sweep
from sweeper.config.decision import DecisionOptions
from sweeper.config.sweep import read_experiment
from sweeper.errors import UsageError
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.manifest import Manifest, RunEntry, read_manifest, write_manifest
from tests.helpers.synthetic_sweep import write_sweep

FAST = dict(options=DecisionOptions(n_resamples=500))
EXPERIMENT = {"name": "toy", "baseline": "a", "metric": "val_loss", "lower_is_better": True,
              "variants": {"a": None, "b": ["lr=0.1"], "c": ["lr=0.1"]}, "min_effect": 0.05,
              "secondary_metrics": {"tokens_per_s": "higher"}, "hypothesis": "a bigger lr helps",
              "notes": {"b": "lr x10"}, "controls": ["c"], "bundles": ["b"], "design": "paired",
              "confirm_direction": True, "silence": {"no_spread": "a toy"}, "resources": {"b": {"ranks_per_run": 2}}}


def _write(tmp_path, experiment: Experiment) -> Manifest:
    runs = [RunEntry(run_id=f"{v}-0", variant=v, seed=0, run_dir=f"runs/{v}/seed_0") for v in experiment.variants]
    write_manifest(tmp_path, Manifest(experiment=experiment, runs=runs, seeds=[0], created=0.0))
    return read_manifest(tmp_path)


def test_the_experiment_the_config_builds_is_the_one_the_manifest_reads_back(tmp_path):
    built = read_experiment({"experiment": EXPERIMENT})
    assert type(built) is Experiment and built.variants["a"] == [] and built.design == "paired"
    back = _write(tmp_path, built).experiment
    assert type(back) is Experiment
    assert back == built                                       # every field, none dropped or defaulted on the way
    assert [f.name for f in dataclasses.fields(back) if getattr(back, f.name) == f.default] == []   # all set here


def test_keys_at_their_default_are_left_out_as_older_versions_wrote_them(tmp_path):
    plain = read_experiment({"experiment": {k: EXPERIMENT[k] for k in
                                            ("name", "baseline", "metric", "lower_is_better", "variants")}})
    _write(tmp_path, plain)
    written = json.loads((tmp_path / "sweep.json").read_text())["experiment"]
    assert list(written) == ["name", "baseline", "metric", "lower_is_better", "variants", "min_effect",
                             "secondary_metrics", "hypothesis", "notes", "controls", "bundles"]
    assert read_manifest(tmp_path).experiment == plain


def older_sweep(tmp_path):
    """A sweep dir whose manifest is as an older version wrote it: variant names in the experiment, their
    overrides beside; no baseline, metric or direction recorded, none of the later keys."""
    root = write_sweep(tmp_path / "s", {"a": [3.0, 3.1, 3.2, 3.05], "b": [2.5, 2.65, 2.62, 2.58]}, baseline="a")
    manifest = json.loads((root / "sweep.json").read_text())
    manifest["experiment"] = {"name": "old", "variants": ["a", "b"]}
    manifest["variant_overrides"] = {"a": [], "b": ["lr=0.1"]}
    (root / "sweep.json").write_text(json.dumps(manifest))
    return root


def test_an_older_manifest_reads_with_its_missing_keys_mapped_and_asks_for_them(tmp_path):
    root = older_sweep(tmp_path)
    exp = read_manifest(root).experiment
    assert exp == Experiment(name="old", baseline="", metric="", lower_is_better=True,
                             variants={"a": [], "b": ["lr=0.1"]})
    with pytest.raises(UsageError, match="no baseline recorded for .*: set experiment.baseline=VARIANT"):
        analyze_sweep(root, **FAST)
    with pytest.raises(UsageError, match=r"no decision metric recorded for .*: set experiment.metric=NAME \(final"):
        analyze_sweep(root, baseline="a", **FAST)


@pytest.mark.slow
def test_an_older_manifest_is_decided_on_the_metric_the_command_names(tmp_path):
    decided = analyze_sweep(older_sweep(tmp_path), baseline="a", metric="val_loss", **FAST).analysis
    assert decided.metric == "val_loss" and [c.verdict for c in decided.comparisons] == ["better"]


def test_the_experiment_states_its_metric():
    with pytest.raises(TypeError, match="metric"):
        Experiment(name="x", baseline="a", lower_is_better=True, variants={"a": []})     # no default to fall to
