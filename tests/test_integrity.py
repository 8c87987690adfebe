"""The checks across runs (sweeper.analysis.integrity) on synthetic evidence: each check fires on its bug and stays
quiet on the healthy twin; the effects become verdicts with the numbers kept; silencing and the plan-time rules.

    python -m pytest -q -n 0 tests/test_integrity.py
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

import sweeper.analysis.integrity.effects as effects
import sweeper.analysis.verdict as verdict
from sweeper.analysis.integrity import CHECKS, Effect, SweepEvidence, check_sweep
from sweeper.analysis.integrity.numbers.baseline import broken_baseline
from sweeper.analysis.integrity.numbers.copies import change_no_effect, seeds_no_effect
from sweeper.analysis.integrity.numbers.direction import metric_direction
from sweeper.analysis.integrity.numbers.selection import selected_final
from sweeper.analysis.integrity.numbers.spread import no_spread
from sweeper.analysis.integrity.records.budget import budget_confound, budget_key
from sweeper.config.decision import DecisionOptions
from sweeper.config.integrity import CHECK_NAMES, check_direction, implied_direction
from sweeper.config.variants.config_diff import Change, Declared
from sweeper.run.files.experiment import Experiment


def curve(final: float, seed: int, variant: str, points: int = 6, wiggle: float = 0.01) -> list[float]:
    """A decaying curve ending at `final`; its noise depends on (variant, seed) unless wiggle is 0."""
    rng = np.random.default_rng(abs(hash((variant, seed))) % 2**32)
    return [final + 1.0 / (i + 1) ** 2 - 1.0 / points ** 2 + (wiggle * rng.random() if i < points - 1 else 0.0)
            for i in range(points)]


def evidence(finals: dict, curves: dict | None = None, *, metric: str = "val_loss", lower: bool = True,
             status: dict | None = None, steps: dict | None = None, changes: dict | None = None,
             controls: tuple = (), confirm: bool = False, extra: dict | None = None,
             declared: dict | None = None) -> SweepEvidence:
    """finals {variant: [final per seed]} (None: diverged); curves {variant: [[values per step] per seed]}
    (default: curve(final) with per-run noise); steps {variant: [last step per seed]}; extra final columns."""
    rows, points = [], []
    for variant, values in finals.items():
        for seed, value in enumerate(values):
            run_id = f"{variant}-s{seed}"
            st = (status or {}).get((variant, seed), "finished" if value is not None else "diverged")
            ys = (curves or {}).get(variant, [None] * len(values))[seed] if curves is not None else \
                (curve(value, seed, variant) if value is not None else [])
            ys = ys if ys is not None else []
            last = (steps or {}).get(variant, [None] * len(values))[seed] or 10 * len(ys) or math.nan
            row = dict(variant=variant, seed=seed, run_id=run_id, run_dir=f"runs/{variant}/seed_{seed}", status=st,
                       steps=last, **{f"final_{metric}": math.nan if value is None else value})
            for column, per in (extra or {}).items():
                row[column] = per[variant][seed]
            rows.append(row)
            n = len(ys)
            for i, y in enumerate(ys):
                step = round(last * (i + 1) / n) if n else 0
                points.append(dict(run_id=run_id, variant=variant, seed=seed, step=step, metric=metric, value=y))
    variants = {v: [] for v in finals}
    exp = Experiment(name="t", baseline=next(iter(finals)), metric=metric, lower_is_better=lower, variants=variants,
                     controls=list(controls), confirm_direction=confirm)
    runs = pd.DataFrame(rows)
    runs.attrs["cost"] = []
    cols = ["run_id", "variant", "seed", "step", "metric", "value"]
    return SweepEvidence(Path("/nonexistent"), exp, runs, pd.DataFrame(points, columns=cols),
                         changes or {}, declared or {})


HEALTHY = {"base": [2.0, 2.1, 1.95, 2.05], "wide": [1.8, 1.85, 1.9, 1.82]}


def test_every_check_is_quiet_on_a_healthy_sweep():
    assert check_sweep(evidence(HEALTHY)) == []


def test_seeds_no_effect_needs_finals_and_curves_identical_across_seeds():
    same = [curve(1.8, 0, "wide", wiggle=0.0)] * 4
    ev = evidence({"base": HEALTHY["base"], "wide": [1.8] * 4}, {"base": [curve(v, s, "base") for s, v in
                                                                          enumerate(HEALTHY["base"])],
                                                                 "wide": same})
    [f] = seeds_no_effect(ev)
    assert f.variants == ("wide",) and f.effect is Effect.INVALID and f.untested
    assert "4 seeds (0, 1, 2, 3) of wide: final val_loss 1.8 in each" in f.evidence
    assert "seed never reaches the code" in f.message
    # same finals but curves that differ by seed: the seed does reach the code
    ev = evidence({"base": HEALTHY["base"], "wide": [1.8] * 4})
    assert seeds_no_effect(ev) == []
    # float rounding counts as the same run; a real difference does not
    ev = evidence({"base": HEALTHY["base"], "wide": [1.8, 1.8 * (1 + 1e-9), 1.8, 1.8]},
                  {"base": [curve(v, s, "base") for s, v in enumerate(HEALTHY["base"])], "wide": same})
    assert len(seeds_no_effect(ev)) == 1
    ev = evidence({"base": HEALTHY["base"], "wide": [1.8, 1.8001, 1.8, 1.8]},
                  {"base": [curve(v, s, "base") for s, v in enumerate(HEALTHY["base"])], "wide": same})
    [f] = seeds_no_effect(ev)                  # seed 1 differs: the others are still copies of one run
    assert f.effect is Effect.WARN and not f.untested and f.copies == ("wide-s2", "wide-s3")
    assert "seeds 0, 2 and 3 gave the same run" in f.evidence and "2 distinct runs from 4 seeds" in f.evidence


def test_seeds_no_effect_without_curves_needs_three_seeds():
    ev = evidence({"base": [2.0, 2.0], "wide": [1.8, 1.9]}, {"base": [[], []], "wide": [[], []]})
    assert seeds_no_effect(ev) == []
    ev = evidence({"base": [2.0, 2.0, 2.0], "wide": [1.8, 1.9, 1.7]}, {"base": [[]] * 3, "wide": [[]] * 3})
    assert [f.variants for f in seeds_no_effect(ev)] == [("base",)]


def test_change_no_effect_names_the_keys_and_spares_controls():
    base_curves = [curve(v, s, "base") for s, v in enumerate(HEALTHY["base"])]
    changes = {"wide": [Change("hidden-dim", new=64)]}
    declared = {"wide": [Declared("+hidden-dim=64", ("hidden-dim",))]}
    ev = evidence({"base": HEALTHY["base"], "wide": list(HEALTHY["base"])},
                  {"base": base_curves, "wide": base_curves}, changes=changes, declared=declared)
    [f] = change_no_effect(ev)
    assert f.variants == ("wide",) and f.effect is Effect.INVALID and not f.untested
    assert "4 of 4 seeds of wide equal base's at the same seed" in f.evidence
    assert "+hidden-dim: 64 (from `+hidden-dim=64`)" in f.evidence
    assert "never reached the code" in f.message and "parse_known_args" in f.message
    ev_control = evidence({"base": HEALTHY["base"], "wide": list(HEALTHY["base"])},
                          {"base": base_curves, "wide": base_curves}, changes=changes, controls=("wide",))
    assert change_no_effect(ev_control) == []
    # one seed differs: the change reached the code there only (a warning, the seeds named)
    wide = list(HEALTHY["base"])
    wide[2] += 0.01
    ev = evidence({"base": HEALTHY["base"], "wide": wide}, {"base": base_curves, "wide": base_curves})
    [f] = change_no_effect(ev)
    assert f.effect is Effect.WARN and "3 of 4 seeds of wide equal base's at the same seed (seeds 0, 1, 3)" \
        in f.evidence


def test_metric_direction_by_name_and_by_curve():
    assert implied_direction("val_loss") == "lower" and implied_direction("val/top1_acc") == "higher"
    assert implied_direction("episodeReturn") == "higher" and implied_direction("bleu4") == "higher"
    assert implied_direction("objective") is None and implied_direction("neg_loss") is None
    assert implied_direction("train_loss_acc") is None
    warning = check_direction("val_loss", False, False, "experiment.lower_is_better=false")   # warns, refuses not
    assert "val_loss is declared higher-is-better, but its name reads like a loss" in warning
    assert check_direction("val_loss", False, True, "x") is None          # confirmed
    assert check_direction("objective", False, False, "x") is None        # no opinion
    [f] = metric_direction(evidence(HEALTHY, lower=False))                # the curve confirms the name
    assert f.effect is Effect.INVALID and "training lowers it in 8 of 8 runs" in f.evidence
    [f] = metric_direction(evidence(HEALTHY, {v: [[]] * 4 for v in HEALTHY}, lower=False))   # no curve: the name
    assert f.effect is Effect.WARN and "name reads lower-is-better, and no curve decides" in f.evidence
    rising = {v: [curve(x, s, v)[::-1] for s, x in enumerate(vals)] for v, vals in HEALTHY.items()}
    assert metric_direction(evidence(HEALTHY, rising, lower=False, confirm=True)) == []
    [f] = metric_direction(evidence(HEALTHY, lower=False, confirm=True))   # confirmed, yet it falls as it trains
    assert "training lowers it in 8 of 8 runs" in f.evidence
    # a metric whose name says nothing: its curve falls in every run, declared higher-is-better
    [f] = metric_direction(evidence(HEALTHY, metric="objective", lower=False))
    assert "training lowers it in 8 of 8 runs" in f.evidence
    assert metric_direction(evidence(HEALTHY, metric="objective", lower=True)) == []


def test_budget_confound_from_a_changed_key_with_the_common_budget():
    assert budget_key("train.steps") and budget_key("max_epochs") and budget_key("total_timesteps")
    assert not budget_key("train.warmup_steps") and not budget_key("eval.steps") and not budget_key("lr_decay_steps")
    ev = evidence(HEALTHY, steps={"base": [100] * 4, "wide": [300] * 4},
                  changes={"wide": [Change("train.steps", 100, 300), Change("model.width", 32, 128)]})
    [f] = budget_confound(ev)
    assert f.variants == ("wide",) and f.effect is Effect.NOT_COMPARABLE
    assert "wide changes the training budget: train.steps: 100 -> 300" in f.evidence
    assert "model.width" not in f.evidence
    assert "at the common budget (step 100" in f.evidence
    quiet = evidence(HEALTHY, changes={"wide": [Change("train.warmup_steps", 10, 20)]})
    assert budget_confound(quiet) == []


def test_budget_confound_from_the_runs_own_last_steps():
    ev = evidence(HEALTHY, steps={"base": [1000] * 4, "wide": [300, 350, 320, 400]})
    [f] = budget_confound(ev)
    assert "the runs' own last steps differ: wide stopped at step 300 to 400 (median 335), base at 1000" in f.evidence
    assert budget_confound(evidence(HEALTHY, steps={"base": [1000] * 4, "wide": [950, 1000, 1000, 980]})) == []


def test_selected_final_is_the_best_evaluation_not_the_last():
    def u_shape(best, seed):             # falls to `best`, then rises: the last point is worse than the best
        return [best + 1.0, best + 0.3, best, best + 0.2 + 0.01 * seed]

    ev = evidence(HEALTHY, {v: [u_shape(b, s) for s, b in enumerate(vals)] for v, vals in HEALTHY.items()})
    [f] = selected_final(ev)
    assert set(f.variants) == {"base", "wide"} and f.effect is Effect.INVALID
    assert "base: 4 of 4 runs" in f.evidence and "best of 4" in f.evidence
    # the same curves, the final being the last point: quiet
    lasts = {v: [u_shape(b, s)[-1] for s, b in enumerate(vals)] for v, vals in HEALTHY.items()}
    ev = evidence(lasts, {v: [u_shape(b, s) for s, b in enumerate(vals)] for v, vals in HEALTHY.items()})
    assert selected_final(ev) == []


def test_no_spread_when_every_run_of_every_arm_is_one_value():
    ev = evidence({"base": [1.0] * 3, "wide": [1.0] * 3}, metric="val_acc", lower=False)
    [f] = no_spread(ev)
    assert "final val_acc 1 in every one (the metric's upper bound)" in f.evidence and f.variants == ()
    assert no_spread(evidence({"base": [1.0, 0.98, 1.0], "wide": [1.0] * 3}, metric="val_acc", lower=False)) == []


def test_broken_baseline_only_when_no_baseline_seed_is_usable():
    ev = evidence({"base": [None] * 4, "wide": HEALTHY["wide"]})
    [f] = broken_baseline(ev)
    assert f.effect is Effect.NO_BASELINE and f.untested and f.variants == ("base",)
    assert "base: 0 usable of 4 planned seeds (4 diverged)" in f.evidence
    assert broken_baseline(evidence({"base": [None, None, 2.0], "wide": HEALTHY["wide"][:3]})) == []


def test_effects_keep_the_numbers_and_skip_tests_on_copies():
    finals = {"base": [None] * 4, "wide": HEALTHY["wide"]}
    ev = evidence(finals)
    findings = check_sweep(ev)
    family = [("wide", "base")]
    skip = effects.untested(findings, family)
    an = verdict.analyze(ev.runs, "val_loss", True, family, DecisionOptions(n_resamples=200), untested=skip)
    c = an.comparisons[0]
    assert c.primary is None and c.decision_ci is None          # no -inf to -inf interval
    effects.apply(findings, an)
    assert c.verdict == "no baseline" and c.integrity_checks == ["broken_baseline"] and c.numbers_say == ""
    assert c.reason.startswith("broken_baseline: the baseline base has no usable seed")
    # without the skip the numbers say better (the worst-rank test); the finding keeps that beside its verdict
    an = verdict.analyze(ev.runs, "val_loss", True, family, DecisionOptions(n_resamples=200))
    assert an.comparisons[0].verdict == "better"
    effects.apply(findings, an)
    assert an.comparisons[0].verdict == "no baseline" and an.comparisons[0].numbers_say == "better"
    assert "the numbers alone would say better" in an.comparisons[0].reason


def test_a_silenced_check_is_kept_and_changes_nothing():
    ev = evidence(HEALTHY, steps={"base": [100] * 4, "wide": [300] * 4},
                  changes={"wide": [Change("train.steps", 100, 300)]})
    [f] = check_sweep(ev, {"budget_confound": "a compute-scaling study"})
    assert f.silenced == "a compute-scaling study" and not f.active
    an = verdict.analyze(ev.runs, "val_loss", True, [("wide", "base")], DecisionOptions(n_resamples=200))
    before = an.comparisons[0].verdict
    effects.apply([f], an)
    assert an.comparisons[0].verdict == before and an.comparisons[0].integrity_checks == []


def test_every_check_has_a_name_that_experiment_silence_accepts():
    assert [c.__name__ for c in CHECKS if c.__name__ not in CHECK_NAMES] == []


def test_a_check_that_breaks_is_a_warning_not_a_lost_report(monkeypatch):
    import sweeper.analysis.integrity as integrity

    def exploding(ev):
        raise KeyError("final_val_loss")

    monkeypatch.setattr(integrity, "CHECKS", [exploding])
    [f] = check_sweep(evidence(HEALTHY))
    assert f.check == "exploding" and f.effect is Effect.WARN and not f.active
    assert "the check could not run: KeyError" in f.evidence


def test_the_live_view_names_copies_the_moment_a_run_ends(tmp_path):
    import io
    from types import SimpleNamespace

    from sweeper.backends.progress import Progress
    from sweeper.run.files.records import Summary
    from sweeper.run.files.rundir import RunDir
    from sweeper.run.files.status_values import Status

    def run(variant, seed, final):
        rd = RunDir(tmp_path / variant / str(seed))
        rd.path.mkdir(parents=True)
        rd.write_summary(Summary(status=Status.FINISHED, final=final, steps=10))
        return SimpleNamespace(label=f"{variant}/seed_{seed}", variant=variant, seed=seed, run_dir=rd.path)

    out = io.StringIO()
    p = Progress(total=6, stream=out, live=False, baseline="base", controls=("aa",))
    for variant, seed, final in [("base", 0, {"val_loss": 2.31}), ("base", 1, {"val_loss": 2.29}),
                                 ("wide", 0, {"val_loss": 2.31}), ("aa", 0, {"val_loss": 2.31}),
                                 ("deep", 0, {"val_loss": 2.11}), ("deep", 1, {"val_loss": 2.11})]:
        p.ended(run(variant, seed, final), {"status": "finished"}, 0.1)
    lines = [x.split("] ", 1)[1] for x in out.getvalue().splitlines() if "INTEGRITY" in x]
    assert lines == [
        "INTEGRITY change_no_effect: wide/seed_0 ended with exactly the final metrics of base/seed_0: the change of "
        "wide may not reach the code (the report checks the curves too)",
        "INTEGRITY seeds_no_effect: deep/seed_1 ended with exactly the final metrics of deep/seed_0: the seed may "
        "not reach the code (the report checks the curves too)"], lines
