"""The second round of dev A's checks across runs, on synthetic evidence (the honest level for the rules; the CLI
tests run them through real sweeps): the run-equality graph (partial copies, the effective number of distinct
runs), series identity (eval_is_train), the direction read against the run's own objective (overfitting stays
quiet), the metric's resolution (coarse_metric) and a final selected beyond its logged curve; every coverage line.

    python -m pytest -q -n 0 tests/test_integrity_evidence_graph.py
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

import sweeper.analysis.integrity.effects as effects
import sweeper.analysis.verdict as verdict
from sweeper.analysis.integrity import COVERAGE, Effect, SweepEvidence, check_sweep
from sweeper.analysis.integrity.graph import RunGraph, fine
from sweeper.analysis.integrity.numbers.coarse import coarse_metric, grid_step, unpromise
from sweeper.analysis.integrity.numbers.copies import change_no_effect, seeds_no_effect
from sweeper.analysis.integrity.numbers.direction import metric_direction, read_directions
from sweeper.analysis.integrity.numbers.selection import selected_final
from sweeper.analysis.integrity.numbers.series import eval_is_train
from sweeper.config.decision import DecisionOptions
from sweeper.run.files.experiment import Experiment

STEPS = [10, 20, 30, 40, 50, 60, 70, 80]


def build(runs: dict, *, metric: str = "val_loss", lower: bool = True, controls: tuple = (),
          steps: int | None = 80, finals_extra: dict | None = None) -> SweepEvidence:
    """runs {(variant, seed): {metric: [value per step of STEPS] or a final float}}: a list is a curve (its last
    point is the final unless a float is given under "final")."""
    rows, points = [], []
    for (variant, seed), series in runs.items():
        run_id = f"{variant}-s{seed}"
        row = dict(variant=variant, seed=seed, run_id=run_id, run_dir=f"runs/{variant}/seed_{seed}",
                   status="finished", steps=steps if steps is not None else math.nan)
        for name, ys in series.items():
            if name == "final":
                continue
            if isinstance(ys, (int, float)):
                row[f"final_{name}"] = float(ys)
                continue
            row[f"final_{name}"] = float(ys[-1])
            points += [dict(run_id=run_id, variant=variant, seed=seed, step=s, metric=name, value=float(y))
                       for s, y in zip(STEPS, ys)]
        if "final" in series:
            row[f"final_{metric}"] = float(series["final"])
        row.update((finals_extra or {}).get((variant, seed), {}))
        rows.append(row)
    variants = {v: [] for v, _ in runs}
    exp = Experiment(name="t", baseline=next(iter(variants)), metric=metric, lower_is_better=lower,
                     variants=variants, controls=list(controls))
    frame = pd.DataFrame(rows)
    frame.attrs["cost"] = []
    cols = ["run_id", "variant", "seed", "step", "metric", "value"]
    return SweepEvidence(Path("/nonexistent"), exp, frame, pd.DataFrame(points, columns=cols), {}, {})


def loss(seed: int, variant: str, end: float = 2.0) -> list[float]:
    """A falling training-like curve whose noise depends on (variant, seed)."""
    rng = np.random.default_rng(abs(hash((variant, seed))) % 2**32)
    return [end + 2.0 / (i + 1) + 0.01 * rng.random() for i in range(len(STEPS))]


def healthy(seeds=4, arms=("base", "new")) -> dict:
    return {(v, s): {"val_loss": loss(s, v, 2.0 - 0.1 * k), "train_loss": loss(s + 100, v, 1.5 - 0.1 * k)}
            for k, v in enumerate(arms) for s in range(seeds)}


def test_healthy_sweep_is_quiet_and_every_check_of_dev_a_says_what_it_read():
    ev = build(healthy())
    assert check_sweep(ev) == []
    lines = {c: COVERAGE[c](ev) for c in ("seeds_no_effect", "change_no_effect", "eval_is_train", "metric_direction",
                                          "coarse_metric", "selected_final", "no_spread", "broken_baseline",
                                          "nondeterminism")}
    assert "8 usable runs of 2 arm(s)" in lines["seeds_no_effect"].evidence and "8 distinct runs" in \
        lines["seeds_no_effect"].evidence
    assert "1 (evaluation, training) series pair(s) compared in 8 run(s)" == lines["eval_is_train"].evidence
    assert "8 move the declared way" in lines["metric_direction"].evidence
    assert not lines["nondeterminism"].checked and "no A/A control" in lines["nondeterminism"].evidence
    assert all(line.checked for c, line in lines.items() if c != "nondeterminism")


def test_seeds_that_collide_in_part_are_named_and_the_test_counts_each_distinct_run_once():
    runs = healthy()
    runs[("new", 2)] = dict(runs[("new", 0)])                 # seed 2 is seed 0's run
    ev = build(runs)
    [f] = seeds_no_effect(ev)
    assert f.effect is Effect.WARN and f.variants == ("new",) and f.copies == ("new-s2",)
    assert "seeds 0 and 2 gave the same run" in f.evidence and "3 distinct runs from 4 seeds" in f.evidence
    family = [("new", "base")]
    tested = ev.runs[~ev.runs["run_id"].isin(effects.copies([f]))]
    an = verdict.analyze(tested, "val_loss", True, family, DecisionOptions(n_resamples=200))
    assert an.arms["new"].usable == 3                          # copies are not seeds
    effects.apply([f], an)
    assert any("the test counts each distinct run once" in n for n in an.comparisons[0].notes)
    assert effects.copies([f.silence("a deterministic solver")]) == set()


def test_float_rounding_is_the_same_run_on_either_grid_and_a_real_difference_is_not():
    runs = healthy()
    curve = runs[("new", 0)]["val_loss"]
    runs[("new", 1)] = {**runs[("new", 0)], "val_loss": [y * (1 + 3e-10) for y in curve]}
    runs[("new", 3)] = {**runs[("new", 0)], "val_loss": [y + 1e-4 for y in curve]}
    g = RunGraph(build(runs))
    assert g.cls[4] == g.cls[5] and g.cls[4] != g.cls[7]


def test_coarse_finals_without_curves_collide_by_chance_and_are_not_copies():
    runs = {("base", s): {"val_acc": v} for s, v in enumerate([0.85, 0.9, 0.85, 0.8])}
    runs |= {("new", s): {"val_acc": v} for s, v in enumerate([0.9, 0.85, 0.95, 0.9])}
    ev = build(runs, metric="val_acc", lower=False)
    assert seeds_no_effect(ev) == [] and change_no_effect(ev) == []
    assert fine(np.array([0.85, 2 / 3, np.float32(0.85), 2.718281828459045, math.nan])).tolist() == \
        [False, False, False, True, False]


def test_a_variant_equal_to_the_baseline_at_some_seeds_and_two_variants_equal_to_each_other():
    runs = healthy(arms=("base", "new", "other", "twin"))
    for s in (0, 1, 2):
        runs[("new", s)] = dict(runs[("base", s)])
    for s in range(4):
        runs[("twin", s)] = dict(runs[("other", s)])
    found = change_no_effect(build(runs))
    new = [f for f in found if f.variants == ("new",)]
    pair = [f for f in found if f.variants == ("other", "twin")]
    assert len(new) == 1 and new[0].effect is Effect.WARN and "3 of 4 seeds of new equal base's" in new[0].evidence
    assert len(pair) == 1 and "gave the same run at every one of 4 seeds" in pair[0].evidence
    assert change_no_effect(build(runs, controls=("new",))) == [pair[0]]


def test_an_evaluation_series_equal_to_a_training_series_is_the_training_data():
    runs = healthy()
    for s in range(4):
        runs[("new", s)]["val_loss"] = list(runs[("new", s)]["train_loss"])
    [f] = eval_is_train(build(runs))
    assert f.check == "eval_is_train" and f.variants == ("new",) and f.effect is Effect.INVALID
    assert "val_loss equals train_loss at every shared step" in f.evidence and "new: 4 of 4 runs" in f.evidence
    # a best-so-far, an alias of the training loss, and another training series equal to it: not evaluations
    quiet = healthy()
    for key, series in quiet.items():
        series["best_val_loss"] = list(np.minimum.accumulate(series["val_loss"]))
        series["loss"] = list(series["train_loss"])
    assert eval_is_train(build(quiet)) == []


def test_the_decision_metric_is_the_evaluation_whatever_its_name():
    """check_err (no evaluation word) is what the sweep is judged on: equal to fit_err at every logged step, it
    read the training data; a decision metric named as the objective (objective, loss) is not an evaluation, and
    a final alone equal to a training curve's last point is one number reported twice."""
    runs = {(v, s): {"check_err": loss(s, v, 1.0), "fit_err": loss(s, v, 1.0)} for v in ("base", "new")
            for s in range(3)}
    [f] = eval_is_train(build(runs, metric="check_err"))
    assert f.effect is Effect.INVALID and "check_err equals fit_err" in f.evidence
    assert set(f.variants) == {"base", "new"}
    assert eval_is_train(build(runs, metric="fit_err")) == []          # named as training: no evaluation series
    objective = {(v, s): {"objective": loss(s, v, 1.0), "loss": loss(s, v, 1.0)} for v in ("base", "new")
                 for s in range(3)}
    assert eval_is_train(build(objective, metric="objective")) == []
    once = {(v, s): {"score": 0.4123457 + 0.0131 * s, "curve": [0.9, 0.7, 0.4123457 + 0.0131 * s]}
            for v in ("base", "new") for s in range(3)}
    assert eval_is_train(build(once, metric="score")) == []


def overfit(seed: int, variant: str) -> list[float]:
    """Falls, then rises: a validation loss of a model that overfits."""
    return [2.0 + 0.05 * (i - 3) ** 2 + 0.001 * seed + 0.01 * (variant == "new") for i in range(len(STEPS))]


def test_overfitting_is_not_an_inverted_direction_and_an_inverted_one_is():
    runs = {(v, s): {"val_loss": overfit(s, v), "train_loss": loss(s, v, 1.0)} for v in ("base", "new")
            for s in range(3)}
    ev = build(runs)
    assert metric_direction(ev) == [] and set(read_directions(ev)[0].values()) == {"overfits"}
    assert "overfitting, not an inverted direction" in COVERAGE["metric_direction"](ev).evidence
    # worse from the first evaluation on while the objective falls: still overfitting, the name agrees
    rising = {(v, s): {"val_loss": [2.0 + 0.1 * i + 0.001 * s for i in range(8)], "train_loss": loss(s, v, 1.0)}
              for v in ("base", "new") for s in range(3)}
    assert metric_direction(build(rising)) == []
    # an accuracy declared lower-is-better: it rises with the falling objective from the start
    acc = {(v, s): {"val_acc": [0.5 + 0.05 * i + 0.001 * s for i in range(8)], "train_loss": loss(s, v, 1.0)}
           for v in ("base", "new") for s in range(3)}
    [f] = metric_direction(build(acc, metric="val_acc", lower=True))
    assert f.effect is Effect.INVALID and "as the training objective train_loss improves" in f.evidence
    # a name that says nothing: the objective decides
    score = {(v, s): {"score": [0.5 + 0.05 * i + 0.001 * s for i in range(8)], "train_loss": loss(s, v, 1.0)}
             for v in ("base", "new") for s in range(3)}
    assert len(metric_direction(build(score, metric="score", lower=True))) == 1
    assert metric_direction(build(score, metric="score", lower=False)) == []


def test_the_objective_decides_a_neutral_metric_that_jumps_with_it_then_drifts_back():
    """A metric that improves in one jump with the objective's big first move, then drifts back (overfitting) by
    less or by more than it gained: its overall trend says nothing or the opposite; the joint moves decide."""
    nll = [0.69, 0.16, 0.10, 0.07, 0.056, 0.046, 0.039, 0.034]
    sag = {(v, s): {"agreement": [0.5, 0.65, 0.64, 0.635, 0.63, 0.625, 0.62, 0.62 - 0.002 * s - 0.004 * k],
                    "train_nll": [y * (1 + 0.01 * s) for y in nll]}
           for k, v in enumerate(("base", "new")) for s in range(3)}
    [f] = metric_direction(build(sag, metric="agreement", lower=True))
    assert f.effect is Effect.INVALID and "training raises it in 6 of 6 runs" in f.evidence
    assert metric_direction(build(sag, metric="agreement", lower=False)) == []
    drift = {(v, s): {"distortion": [5.0, 2.4, 2.5, 2.7, 3.0, 3.4, 3.9, 4.5 + 0.01 * s + 0.02 * k],
                      "loss": [5.8, 0.97, 0.71, 0.62, 0.57, 0.53, 0.5, 0.49 - 0.001 * s]}
             for k, v in enumerate(("base", "new")) for s in range(3)}
    ev = build(drift, metric="distortion", lower=True)                 # overfits past its start: healthy
    assert metric_direction(ev) == [] and set(read_directions(ev)[0].values()) == {"overfits"}
    assert len(metric_direction(build(drift, metric="distortion", lower=False))) == 1


def test_a_coarse_metric_is_named_and_no_seeds_are_promised_but_a_fine_grid_is_quiet():
    rng = np.random.default_rng(0)
    coarse = {(v, s): {"val_acc": float(rng.choice([0.85, 0.9, 0.95]))} for v in ("base", "new") for s in range(5)}
    ev = build(coarse, metric="val_acc", lower=False)
    [f] = coarse_metric(ev)
    assert f.effect is Effect.WARN and "on a grid of step 0.05" in f.evidence
    an = verdict.analyze(ev.runs, "val_acc", False, [("new", "base")], DecisionOptions(n_resamples=200))
    c = an.comparisons[0]
    if c.verdict == "inconclusive" and c.seeds_needed:
        unpromise([f], an)
        assert "seeds per arm would be needed" not in c.reason and "(coarse_metric)" in c.reason
    fine_grid = {(v, s): {"val_acc": float(np.round(0.9 + 0.01 * rng.standard_normal(), 3))}
                 for v in ("base", "new") for s in range(5)}     # an accuracy on 1,000 examples
    assert coarse_metric(build(fine_grid, metric="val_acc", lower=False)) == []
    assert abs(grid_step(np.array([0.85, 0.9, 1.0])) - 0.05) < 1e-9 and grid_step(np.array([1.0])) == 0.0


def test_a_final_selected_over_a_trailing_window_or_hidden_behind_its_own_record_at_the_last_step():
    runs = healthy()
    for (variant, seed), series in runs.items():                  # an accuracy-like noisy curve, lower is better
        series["val_loss"] = [2.0, 1.5, 1.0, 1.4, 1.1 + 0.01 * seed, 1.3, 1.25, 1.35]   # best: not in the window
        series["final"] = min(series["val_loss"][-5:])             # the best of the last 5 evaluations
    [f] = selected_final(build(runs))
    assert f.effect is Effect.INVALID and f.variants == ("base", "new") and "base: 4 of 4 runs" in f.evidence
    assert selected_final(build(runs, steps=1000)) == []          # the curve stops early: a later evaluation may tie
    # a command's final line repeats the last step: the curve holds the final there, the evaluation was overwritten
    hidden = healthy()
    for series in hidden.values():
        series["final"] = min(series["val_loss"]) - 0.05
    ev = build({k: {**v, "val_loss": v["val_loss"][:-1] + [v["final"]]} for k, v in hidden.items()})
    assert selected_final(ev) == []                                # the final looks like the last evaluation
    ev.curves.attrs["overwritten"] = tuple((f"{v}-s{s}", v, s, STEPS[-1], "val_loss", series["val_loss"][-1])
                                           for (v, s), series in hidden.items())
    [f] = selected_final(ev)
    assert "beats every logged point" in f.evidence
    ev.curves.attrs["overwritten"] = tuple((f"{v}-s{s}", v, s, STEPS[-1], "val_loss", series["final"])
                                           for (v, s), series in hidden.items())   # the final line repeats it
    assert selected_final(ev) == []


def test_a_coarse_grid_is_named_on_every_arm_without_a_majority_of_ties_and_a_fine_print_is_quiet():
    """4 seeds an arm, a loss printed to one decimal: 5 distinct values over 8 runs (few ties), step 0.1 against
    a seed sd of 0.15; the same losses printed to 4 decimals are a fine grid."""
    fine4 = {"base": [0.5874, 0.6652, 0.4248, 0.5208], "new": [0.825, 0.7333, 0.3773, 0.6318]}
    coarse = {(v, s): {"val_loss": round(x, 1)} for v, xs in fine4.items() for s, x in enumerate(xs)}
    assert len({v["val_loss"] for v in coarse.values()}) * 2 > len(coarse)       # most runs do not tie
    [f] = coarse_metric(build(coarse))
    assert f.variants == ("base", "new") and "on a grid of step 0.1" in f.evidence
    assert coarse_metric(build({(v, s): {"val_loss": x} for v, xs in fine4.items() for s, x in enumerate(xs)})) == []


def test_a_final_better_than_every_logged_point_is_a_selection_when_the_curve_reaches_the_last_step():
    runs = healthy()
    for key, series in runs.items():
        series["final"] = min(series["val_loss"]) - 0.05        # better than every logged evaluation
    [f] = selected_final(build(runs))
    assert f.effect is Effect.INVALID and "beats every logged point" in f.evidence
    assert selected_final(build(runs, steps=1000)) == []         # the curve stops early: the final may be later


def test_a_selection_over_unlogged_evaluations_where_one_run_was_best_at_its_last_point():
    """Evaluated every epoch, logged every 5th, final = the best of all: 3 runs beat every logged point, the 4th's
    best was its last point (final == last: no evidence either way). A final on other data that beats the best
    logged point in half the runs, or finals equal to the last point, stay quiet."""
    runs = healthy()
    for (variant, seed), series in runs.items():
        if seed == 2:
            series["val_loss"] = sorted(series["val_loss"], reverse=True)     # still improving at the end
            series["final"] = series["val_loss"][-1]
        else:
            series["final"] = min(series["val_loss"]) - 3e-4
    [f] = selected_final(build(runs))
    assert f.variants == ("base", "new") and "beats every logged point" in f.evidence
    for (variant, seed), series in runs.items():                # a full-set evaluation after the curve: half beat
        series["final"] = min(series["val_loss"]) + (-3e-4 if seed % 2 else 0.02)
    assert selected_final(build(runs)) == []
    for series in runs.values():
        series["final"] = series["val_loss"][-1]                   # honest: the last evaluation
    assert selected_final(build(runs)) == []


def test_a_grid_that_already_ties_the_runs_is_coarse_below_half_the_sd_and_a_fine_grid_with_ties_is_not():
    """An accuracy on 20 examples: step 0.05 against a pooled seed sd of 0.11 (under half of it), yet one arm's
    seeds sit on 2 values; two arms meeting on a grid of 0.01 (ties across arms only), an accuracy on 1,000
    examples with two ties (step 0.001, sd 0.007): no coarse grid."""
    quick = {"base": [0.8, 0.85, 0.7, 0.5], "new": [0.75, 0.75, 0.75, 0.8]}
    ev = build({(v, s): {"val_acc": x} for v, xs in quick.items() for s, x in enumerate(xs)}, metric="val_acc",
               lower=False)
    [f] = coarse_metric(ev)
    assert "5 distinct values over 8 runs, on a grid of step 0.05" in f.evidence
    across = {"base": [0.57, 0.49, 0.54], "new": [0.48, 0.49, 0.54]}    # an accuracy on 100 examples: the arms
    assert coarse_metric(build({(v, s): {"val_acc": x} for v, xs in across.items() for s, x in enumerate(xs)},
                               metric="val_acc", lower=False)) == []      # meet on the grid, no arm ties itself
    fine = {"base": [0.912, 0.905, 0.921, 0.905], "new": [0.930, 0.917, 0.930, 0.925]}
    assert coarse_metric(build({(v, s): {"val_acc": x} for v, xs in fine.items() for s, x in enumerate(xs)},
                               metric="val_acc", lower=False)) == []
