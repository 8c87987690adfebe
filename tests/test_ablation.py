"""Ablation discipline: what each variant changes (resolved configs), one change per variant, twins refused,
and a broken baseline stops the sweep before any variant launches."""
from __future__ import annotations

import json

import pytest

from sweeper.config.sweep import compose_sweep
from sweeper.config.variants.config_diff import (
    MISSING,
    Change,
    Declared,
    describe,
    diff_configs,
    flatten,
    group_changes,
)
from sweeper.errors import UsageError
from sweeper.run.files.manifest import read_manifest
from tests.helpers.commands import TINY, run_sweeper, sweeper_cli
from tests.helpers.local_pool import run, user_project

TWO = "+experiment.variants.both=['model.pos_encoding=none','train.lr=0.01']"


# -- config_diff: pure functions ------------------------------------------------------------------------------------

def test_diff_names_added_removed_and_changed_keys_with_values_and_ignores_the_seed():
    base = {"seed": 0, "model": {"d": 64, "act": "relu", "drop": 0.0}, "lr": 1, "tags": [1, 2]}
    other = {"seed": 5, "model": {"d": 64, "act": "gelu", "extra": {}}, "lr": 1.0, "tags": [1, 2], "new": None}
    changes = diff_configs(base, other)
    assert [(c.key, c.kind) for c in changes] == [("model.act", "changed"), ("model.drop", "removed"),
                                                 ("lr", "changed"), ("model.extra", "added"), ("new", "added")]
    assert [str(c) for c in changes] == ["model.act: relu -> gelu", "-model.drop (was 0.0)", "lr: 1 -> 1.0",
                                         "+model.extra: {}", "+new: null"]
    assert flatten({"a": {"b": {"c": 1}}, "d": []}) == {"a.b.c": 1, "d": []}
    assert diff_configs(base, dict(base, seed=9)) == []
    assert Change("x", MISSING, 1).to_dict() == {"key": "x", "kind": "added", "new": 1}


def test_a_group_swap_is_one_declared_change_with_all_its_keys():
    changes = [Change("model.d", 64, 128), Change("model.layers", 2, 4), Change("train.lr", 0.1, 0.2)]
    declared = [Declared("model=big", ("model.d", "model.layers")), Declared("train.lr=0.2", ("train.lr",))]
    groups = group_changes(changes, declared)
    assert [(o, [c.key for c in g]) for o, g in groups] == [("model=big", ["model.d", "model.layers"]),
                                                            ("train.lr=0.2", ["train.lr"])]
    assert (
        describe(changes, declared)
        == "model=big (2 keys: model.d: 64 -> 128, model.layers: 2 -> 4); train.lr: 0.1 -> 0.2"
    )
    assert describe(changes, []) == "model.d: 64 -> 128, model.layers: 2 -> 4, train.lr: 0.1 -> 0.2"
    assert describe([], []) == "no change"


# -- plan time: declared changes, warnings, refusals ----------------------------------------------------------------


@pytest.mark.slow
def test_rope_variants_declare_one_change_each_from_the_resolved_configs():
    sweep = compose_sweep(["+experiment=rope"])
    assert sweep.changes == {
        "nope": [Declared("model.pos_encoding=none", ("model.pos_encoding",))],
        "rope_frozen_qk": [Declared("model.rope_impl=fault_no_qk_grad", ("model.rope_impl",))],
    }
    assert sweep.warnings == []


@pytest.mark.slow
def test_a_two_change_variant_warns_naming_both_and_a_no_op_override_is_flagged():
    sweep = compose_sweep(
        [
            "+experiment=rope",
            "+experiment.variants.both=['model.pos_encoding=none','train.lr=0.01','model.rope_impl=auto']",
        ]
    )
    assert sweep.changes["both"] == [
        Declared("model.pos_encoding=none", ("model.pos_encoding",)),
        Declared("train.lr=0.01", ("train.lr",)),
        Declared("model.rope_impl=auto", ()),
    ]
    assert sweep.warnings == [
        "variant both: model.rope_impl=auto changes nothing in the run config (the baseline rope already has that "
        "value); drop it from the variant",
        "variant both makes 2 changes at once (model.pos_encoding=none; train.lr=0.01) in 2 concerns "
        "(several_concerns: model: model.pos_encoding; optimizer: train.lr): its result cannot say which one "
        "mattered; split it into one variant per change, or declare the bundle with experiment.bundles=[both]",
    ]


@pytest.mark.slow
def test_a_variant_replacing_the_baseline_value_of_a_key_is_one_change_and_a_no_op_still_warns(tmp_path):
    """Every variant sets the key the baseline sets (`a: [how=a]`, `b: [how=b]`, as tests/test_script_endings.py's
    do): `how=b` replaces the baseline's `how=a`, so `(no how=a)` is no change of its own and never "changes
    nothing". A `steps=3` that the baseline already has still does."""
    project = user_project(tmp_path / "project", "print('{\"val_loss\": 1.0}')\n",
                           {"a": ["how=a"], "b": ["how=b"], "c": ["how=c", "steps=3"]}, "how: a\nsteps: 3")
    proc = run(["--config-dir", "conf", "+experiment=mine", "seeds=0", "sweeper.dry_run=true",
                f"sweeper.dir={tmp_path / 'sweep'}"], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "changes nothing" in ln]
    assert warnings == ["sweeper: warning: variant c: steps=3 changes nothing in the run config (the baseline a "
                        "already has that value); drop it from the variant"], proc.stderr
    assert not (tmp_path / "sweep").exists()

@pytest.mark.slow
def test_dropping_a_variant_drops_its_note():
    sweep = compose_sweep(["+experiment=rope", "~experiment.variants.rope_frozen_qk"])
    assert set(sweep.experiment.notes) == {"rope", "nope"} and set(sweep.changes) == {"nope"}


@pytest.mark.slow
def test_a_declared_bundle_does_not_warn_and_one_change_error_refuses_an_undeclared_one():
    assert compose_sweep(["+experiment=rope", TWO, "+experiment.bundles=[both]"]).warnings == []
    with pytest.raises(UsageError, match=r"variant both makes 2 changes at once .* \(sweeper.one_change=error\)$"):
        compose_sweep(["+experiment=rope", TWO, "sweeper.one_change=error"])
    assert compose_sweep(["+experiment=rope", TWO, "sweeper.one_change=off"]).warnings == []


BAD_DECLARATIONS = [
    (
        ["+experiment.variants.same=['model.rope_impl=auto']"],
        "variant same is identical to the baseline rope (its run config is the same; overrides: "
        "model.rope_impl=auto)",
    ),
    (["+experiment.variants.again=[]"], "variant again is identical to the baseline rope"),
    (["+experiment.variants.dup=['model.pos_encoding=none']"], "variant dup is identical to variant nope"),
    (["+experiment.variants.seeds_only=['seeds=[5,6]']"], "variant seeds_only is identical to the baseline rope"),
    (["+experiment.controls=[nada]"], "experiment.controls names 'nada', which is not a variant"),
    (["+experiment.bundles=[rope]"], "experiment.bundles names the baseline 'rope'"),
    (["+experiment.notes={x: hi}"], "experiment.notes names 'x', which is not a variant"),
    (["sweeper.one_change=sometimes"], "sweeper.one_change='sometimes': accepted values are warn, error, off"),
]


@pytest.mark.parametrize("overrides, message", BAD_DECLARATIONS)
def test_twins_and_bad_declarations_are_one_line_exit_2_nothing_written(tmp_path, overrides, message):
    d = tmp_path / "sweep"
    real = overrides is BAD_DECLARATIONS[0][0]      # one case through `python -m sweeper`, the rest in process
    res = sweeper_cli("+experiment=rope", *overrides, f"sweeper.dir={d}", "seeds=0", cwd=tmp_path, real=real)
    assert res.code == 2, res.stdout + res.stderr
    assert message in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not d.exists() and res.stdout == "" and res.written == [] and res.started in ([], None)


@pytest.mark.slow
def test_a_declared_control_may_equal_the_baseline_and_the_manifest_records_every_declared_change(tmp_path):
    d = tmp_path / "sweep"
    proc = run_sweeper(
        "+experiment=rope",
        "+experiment.variants.aa=[]",
        "+experiment.controls=[aa]",
        TWO,
        f"sweeper.dir={d}",
        "seeds=0",
        "sweeper.dry_run=true",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "sweeper: warning: variant both makes 2 changes at once (model.pos_encoding=none; "
        "train.lr=0.01) in 2 concerns (several_concerns: model: model.pos_encoding; optimizer: train.lr): its "
        "result cannot say which one mattered; split it into one variant per "
        "change, or declare the bundle with experiment.bundles=[both]\n"
    )
    sweep = compose_sweep(
        [
            "+experiment=rope",
            "+experiment.variants.aa=[]",
            "+experiment.controls=[aa]",
            f"sweeper.dir={d}",
            *TINY,
            "train.steps=1",
        ]
    )
    from sweeper.plan.make import make_plan, write_plan

    write_plan(make_plan(sweep, [0]), ["+experiment=rope"])
    manifest = read_manifest(d)
    assert manifest.changes == {
        "nope": [{"override": "model.pos_encoding=none", "keys": ["model.pos_encoding"]}],
        "rope_frozen_qk": [{"override": "model.rope_impl=fault_no_qk_grad", "keys": ["model.rope_impl"]}],
        "aa": [],
    }
    assert manifest.experiment.controls == ["aa"]


@pytest.mark.slow
def test_a_config_group_swap_counts_as_one_change_and_each_override_gets_its_own_keys(tmp_path):
    """A user config group (model=wide sets two keys) plus a train.lr override: two declared changes."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "wide.yaml").write_text("defaults: [small, _self_]\nd_model: 192\nn_layers: 3\n")
    base = ["--config-dir", str(tmp_path), "+experiment=rope"]
    from sweeper.cli.sweep import overrides_of

    one = compose_sweep(overrides_of(base + ["+experiment.variants.wide=['model=wide']"]))
    assert one.changes["wide"] == [Declared("model=wide", ("model.d_model", "model.n_layers"))]
    assert one.warnings == []
    two = compose_sweep(overrides_of(base + ["+experiment.variants.wide=['model=wide','train.lr=0.01']"]))
    assert two.changes["wide"] == [
        Declared("model=wide", ("model.d_model", "model.n_layers")),
        Declared("train.lr=0.01", ("train.lr",)),
    ]
    assert "variant wide makes 2 changes at once (model=wide; train.lr=0.01)" in two.warnings[0]


# -- baseline first -------------------------------------------------------------------------------------------------

TASK = """
import sweeper
run = sweeper.init()
run.log(1, loss=1.0)
run.finish(val_loss=1.0 + run.config.lr + 0.01 * run.seed)
"""

HOOKS = """
from sweeper.health import CheckResult, HealthReport


def preflight(config):
    status = "fail" if config.get("broken") else "pass"
    return HealthReport([CheckResult("init_loss", status, value=9.1, expected="about 4.6 = ln(V)",
                                     message="initial loss 9.1 is far from ln(V) = 4.6")])
"""


def _project(tmp_path, baseline_broken: bool):
    config = f"lr: 0.1\nbroken: {str(baseline_broken).lower()}"
    project = user_project(tmp_path / "project", TASK, {"base": [], "high": ["lr=0.5", "broken=false"]}, config)
    exp = project / "conf" / "experiment" / "mine.yaml"
    exp.write_text(
        exp.read_text().replace(
            "  command: [python, task.py]\n", "  command: [python, task.py]\n  preflight: hooks:preflight\n"
        )
    )
    (project / "hooks.py").write_text(HOOKS)
    return project


@pytest.mark.slow
def test_a_broken_baseline_stops_the_sweep_before_any_variant_launches(tmp_path):
    project = _project(tmp_path, baseline_broken=True)
    d = tmp_path / "sweep"
    proc = run(["--config-dir", "conf", "+experiment=mine", "seeds=0-1", f"sweeper.dir={d}"], cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "sweeper: error: the baseline base failed its health preflight (init_loss: initial loss 9.1 is far "
        "from ln(V) = 4.6): no variant was launched"
    ) in proc.stderr
    assert "sweeper.baseline_first=false" in proc.stderr
    manifest = read_manifest(d)
    assert {manifest.run_dir(d, e).state().value for e in manifest.runs} == {"pending"}
    assert json.loads((d / "preflight" / "base.json").read_text())["checks"][0]["status"] == "fail"
    assert not (d / "report.md").exists()
    anyway = run(
        [
            "--config-dir",
            "conf",
            "+experiment=mine",
            "seeds=0-1",
            f"sweeper.dir={d}",
            "sweeper.baseline_first=false",
            "sweeper.report=false",
        ],
        cwd=project,
    )
    assert anyway.returncode == 0, anyway.stdout + anyway.stderr
    assert {manifest.run_dir(d, e).state().value for e in manifest.runs} == {"finished"}


@pytest.mark.slow
def test_a_healthy_baseline_is_checked_once_then_everything_launches(tmp_path):
    project = _project(tmp_path, baseline_broken=False)
    d = tmp_path / "sweep"
    proc = run(
        ["--config-dir", "conf", "+experiment=mine", "seeds=0", f"sweeper.dir={d}", "sweeper.report=false"], cwd=project
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "preflight base: PASS" in proc.stdout and "preflight high" not in proc.stdout
    assert sorted(p.name for p in (d / "preflight").iterdir()) == ["base.cache.json", "base.json", "base.log"]
    again = run(
        ["--config-dir", "conf", "+experiment=mine", "seeds=0", f"sweeper.dir={d}", "sweeper.report=false"], cwd=project
    )
    assert again.returncode == 0 and "preflight" not in again.stdout  # nothing left to launch: not re-checked


@pytest.mark.slow
def test_the_built_in_trainer_refuses_an_ablation_on_a_baseline_with_frozen_qk(tmp_path):
    """The real health preflight of the built-in trainer, with the motivating bug as the baseline."""
    d = tmp_path / "sweep"
    tiny = [o for o in TINY if not o.startswith("sweeper.baseline_first")]
    proc = run_sweeper(
        "+experiment=rope",
        "experiment.baseline=rope_frozen_qk",
        "~experiment.variants.nope",
        "seeds=0",
        *tiny,
        f"sweeper.dir={d}",
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the baseline rope_frozen_qk failed its health preflight (gradient_flow:" in proc.stderr
    assert "q_proj" in proc.stderr
    manifest = read_manifest(d)
    assert {manifest.run_dir(d, e).state().value for e in manifest.runs} == {"pending"}
