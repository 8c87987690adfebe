"""Calibration of the decision rule: simulated sweeps with known truth through sweeper.analysis.verdict.analyze itself.

    python benchmarks/calibrate.py                   # default: 300 sweeps per cell, about 9 min on 1 core
    python benchmarks/calibrate.py --reps 2000 --seed 1 --out /tmp/cal
    python benchmarks/calibrate.py --quick           # 25 sweeps per cell, n = 3 and 5 (the test uses this)

Each scenario is a comparison family (2-3 variants against one baseline) with a known truth: no effect, a
small (1 sd) or large (3 sd) effect in one variant; normal or heavy-tailed (t, 3 df, unit variance) seed
noise; independent seeds or seeds sharing randomness (paired: a per-seed offset common to every variant);
lost seeds in either arm (the baseline losing its worst 30%, e.g. 3 of 10; a variant losing its worst 30%;
20% of runs failing at random; a variant losing 70% of its seeds, which the rule must call worse). Each sweep
is a runs DataFrame shaped like sweeper.analysis.results.load_runs (status, final_val_loss, health, fingerprints),
decided by verdict.analyze (lower is better, alpha 0.05, Holm), at n = 3, 4, 5, 10 seeds per arm.

Printed and written to benchmarks/results/calibrate.{json,md}: FWER (any false better/worse in the family,
with its 95% Wilson upper bound), power (the effect variant called correctly) beside the matching t-test's
theoretical power at Holm's first step (alpha / m), coverage of the shown decision interval (the true shift
inside it), and coverage of the P(better) interval where the true P(better) is known. Targets: FWER <= 0.05
in every null scenario, coverage >= 0.93, power within a few points of the t-test's (scenarios without loss).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import special

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from benchmarks._results import write_results  # noqa: E402
from sweeper.analysis import (
    stats,  # noqa: E402
    verdict,
)
from sweeper.config.decision import DecisionOptions  # noqa: E402

ALPHA = 0.05
NS = (3, 4, 5, 10)


@dataclass(frozen=True)
class Scenario:
    name: str
    m: int = 2                  # comparisons in the family
    effect: float = 0.0         # true shift of variant v1 in sd units (lower is better: v1 better by this)
    noise: str = "normal"       # or "t3"
    paired: bool = False
    lose: str = ""              # "" | "baseline-worst" | "variant-worst" | "random" | "variant-most"
    truth: str = "better"       # what v1 is, when effect > 0 or lose == "variant-most"


SCENARIOS = (
    Scenario("null, normal, independent"),
    Scenario("null, normal, paired, 3 comparisons", m=3, paired=True),
    Scenario("null, heavy-tailed, independent", noise="t3"),
    Scenario("null, heavy-tailed, paired", noise="t3", paired=True),
    Scenario("null, baseline loses its worst 30%, independent", lose="baseline-worst"),
    Scenario("null, baseline loses its worst 30%, paired", lose="baseline-worst", paired=True),
    Scenario("null, a variant loses its worst 30%, independent", lose="variant-worst"),
    Scenario("null, 20% of runs fail at random, paired", lose="random", paired=True),
    Scenario("small effect (1 sd), normal, independent", effect=1.0),
    Scenario("large effect (3 sd), normal, paired", effect=3.0, paired=True),
    Scenario("small effect (1 sd), heavy-tailed, paired, 3 comparisons", m=3, effect=1.0, noise="t3", paired=True),
    Scenario("large effect (3 sd), 20% of runs fail at random, independent", effect=3.0, lose="random"),
    Scenario("variant loses 70% of its seeds (diverged), independent", lose="variant-most", truth="worse"),
)


def _noise(rng: np.random.Generator, kind: str, size) -> np.ndarray:
    if kind == "t3":
        return rng.standard_t(3, size) / math.sqrt(3.0)          # unit variance
    return rng.standard_normal(size)


def simulate(sc: Scenario, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """One sweep: baseline v0 and variants v1..vm, n seeds each, as load_runs' columns.   values: (m + 1, n)"""
    arms = sc.m + 1
    if sc.paired:      # per-seed offset shared by every arm; within-seed noise so that sd(a - b) = 1
        values = rng.standard_normal(n)[None, :] + _noise(rng, sc.noise, (arms, n)) / math.sqrt(2.0)
    else:
        values = _noise(rng, sc.noise, (arms, n))
    values[1] -= sc.effect                                       # lower is better: v1 better by `effect` sd
    status = np.full((arms, n), "finished", dtype=object)
    k = max(1, round(0.3 * n))
    if sc.lose == "baseline-worst":
        status[0, np.argsort(values[0])[-k:]] = "diverged"
    elif sc.lose == "variant-worst":
        status[1, np.argsort(values[1])[-k:]] = "diverged"
    elif sc.lose == "variant-most":
        status[1, rng.permutation(n)[:max(1, round(0.7 * n))]] = "diverged"
    elif sc.lose == "random":
        status[rng.random((arms, n)) < 0.2] = "failed"
    values = np.where(status == "finished", values, np.nan)
    seeds = np.tile(np.arange(n), arms)
    variant = np.repeat([f"v{i}" for i in range(arms)], n)
    order = seeds.astype(str) if sc.paired else np.char.add(variant.astype(str), seeds.astype(str))
    return pd.DataFrame({"variant": variant, "seed": seeds, "status": status.ravel(),
                         "final_val_loss": values.ravel(), "health": "pass", "health_failed": "",
                         "fp_data_order_hash": order, "fp_eval_batches_hash": order, "fp_corpus_hash": "c0"})


def _wilson_high(k: int, n: int, z: float = 1.96) -> float:
    if n == 0:
        return math.nan
    p = k / n
    return (p + z * z / (2 * n) + z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n)


def run_cell(sc: Scenario, n: int, reps: int, rng: np.random.Generator, n_resamples: int) -> dict:
    family = [(f"v{i}", "v0") for i in range(1, sc.m + 1)]
    false_families = correct = effect_total = covered = shown = pb_covered = pb_shown = 0
    true_pb = float(special.ndtr(sc.effect / math.sqrt(2.0)))      # P(v1 < v0) for independent normal arms
    for _ in range(reps):
        an = verdict.analyze(simulate(sc, n, rng), "val_loss", True, family,
                             DecisionOptions(alpha=ALPHA, min_seeds=3, n_resamples=n_resamples, seed=0))
        any_false = False
        for i, c in enumerate(an.comparisons, start=1):
            has_truth = i == 1 and (sc.effect > 0 or sc.lose == "variant-most")
            truth = sc.truth if has_truth else "none"
            if c.verdict in ("better", "worse") and c.verdict != truth:
                any_false = True
            if has_truth:
                effect_total += 1
                correct += c.verdict == truth
            ci = c.decision_ci
            if ci is not None and sc.lose != "variant-most":          # its truth is in the lost seeds, no shift
                shift = -sc.effect if i == 1 else 0.0
                shown += 1
                covered += ci.low <= shift <= ci.high
            if i == 1 and c.p_better is not None and not sc.paired and not sc.lose and sc.noise == "normal":
                pb_shown += 1
                pb_covered += c.p_better.low <= true_pb <= c.p_better.high
        false_families += any_false
    theory = (stats.t_power(sc.effect, n, ALPHA / sc.m, sc.paired) if sc.effect > 0 else math.nan)
    return {"n": n, "reps": reps, "fwer": false_families / reps, "fwer_high95": _wilson_high(false_families, reps),
            "power": correct / effect_total if effect_total else math.nan, "t_test_power": theory,
            "coverage": covered / shown if shown else math.nan, "intervals": shown,
            "p_better_coverage": pb_covered / pb_shown if pb_shown else math.nan}


def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=None, help="simulated sweeps per scenario and n (default 300)")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed of the simulation")
    ap.add_argument("--quick", action="store_true", help="25 sweeps per cell, n = 3 and 5 only")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="folder for calibrate.{json,md}")
    ap.add_argument("--n-resamples", type=int, default=500, help="bootstrap resamples (secondary figures only)")
    args = ap.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        print(f"--reps={args.reps}: accepted values are positive integers", file=sys.stderr)
        return 2
    reps = args.reps or (25 if args.quick else 300)
    ns = (3, 5) if args.quick else NS
    rng = np.random.default_rng(args.seed)
    started = time.time()
    cells = []
    for sc in SCENARIOS:
        for n in ns:
            cell = {"scenario": sc.name, "null": sc.effect == 0 and sc.lose != "variant-most",
                    "lost_seeds": bool(sc.lose), "m": sc.m, **run_cell(sc, n, reps, rng, args.n_resamples)}
            cells.append(cell)
            print(f"{sc.name:64s} n={n:<3d} FWER {_f(cell['fwer'])}  power {_f(cell['power'])} "
                  f"(t-test {_f(cell['t_test_power'])})  coverage {_f(cell['coverage'])}", flush=True)
    nulls = [c for c in cells if c["null"]]
    targets = {
        "fwer_max": max(c["fwer"] for c in nulls),
        "coverage_min": min(c["coverage"] for c in cells if not math.isnan(c["coverage"])),
        "power_gap_max": max((c["t_test_power"] - c["power"] for c in cells
                              if not c["lost_seeds"] and not math.isnan(c["t_test_power"])), default=math.nan),
    }
    result = {"reps": reps, "seed": args.seed, "alpha": ALPHA, "ns": list(ns), "seconds": time.time() - started,
              "command": "python benchmarks/calibrate.py" + (" --quick" if args.quick else "") +
                         (f" --reps {args.reps}" if args.reps else "") + (f" --seed {args.seed}" if args.seed else ""),
              "targets": targets, "cells": cells}
    md = ["# Calibration of the decision rule (sweeper.analysis.verdict.analyze)", "",
          f"`{result['command']}`: {reps} simulated sweeps per cell, alpha {ALPHA}, Holm, lower is better; "
          f"{result['seconds']:.0f} s. FWER: share of families with any false better/worse (95% Wilson upper "
          "bound in brackets). Power: the effect variant called correctly; beside it the t-test's theoretical "
          "power at alpha/m. Coverage: share of shown decision intervals holding the true shift. "
          "P(better) coverage: its Newcombe interval, independent normal arms.", "",
          "| scenario | n | FWER | power | t-test power | coverage | P(better) coverage |",
          "|---|---|---|---|---|---|---|"]
    md += [f"| {c['scenario']} | {c['n']} | {_f(c['fwer'])} [{_f(c['fwer_high95'])}] | {_f(c['power'])} | "
           f"{_f(c['t_test_power'])} | {_f(c['coverage'])} | {_f(c['p_better_coverage'])} |" for c in cells]
    md += ["", f"- largest FWER in a null scenario: {_f(targets['fwer_max'])} (target <= 0.05)",
           f"- smallest coverage of a shown interval: {_f(targets['coverage_min'])} (target >= 0.93)",
           f"- largest shortfall of power against the t-test (no lost seeds): {_f(targets['power_gap_max'])}"]
    out = Path(args.out)
    write_results(out, "calibrate", result, md)
    print("\n".join(md[-3:]))
    print(f"wrote {out / 'calibrate.json'} and {out / 'calibrate.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
