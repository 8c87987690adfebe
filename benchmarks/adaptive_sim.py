"""Adaptive seeds by simulation: family-wise error, power and runs of the real decision code (sweeper.adaptive)
against the fixed design at max_seeds (paired t-test / worst-rank test + Holm, as sweeper.verdict decides).

    python benchmarks/adaptive_sim.py            # default: every scenario, 200 sweeps each (< ~10 min, 2 cores)
    python benchmarks/adaptive_sim.py --quick    # 40 sweeps per scenario (the test's mode)
    python benchmarks/adaptive_sim.py --sweeps 2000 --out /tmp/x

Truth is known: per seed, each arm's value = seed effect (shared by every arm: what pairing cancels) + the
arm's true difference + noise (normal, or Student t with 3 df scaled to unit sd: heavy tails). Effects are in
units of the sd of a paired difference: small 0.5, medium 1.0 (= min_effect, the smallest effect that
matters), large 2.0. Lost seeds: each run fails with probability 0.1 (it then counts against its arm, as in
the fixed design). Design: start 3, batch 2, max_seeds 9, alpha 0.05, O'Brien-Fleming-type spending.
Writes benchmarks/results/adaptive_sim.{json,md}.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweeper import adaptive, stats  # noqa: E402

DESIGN = adaptive.Design(alpha=0.05, start=3, batch=2, max_seeds=9, min_effect=1.0, spending="obf")
EFFECTS = {"null": 0.0, "small": 0.5, "medium": 1.0, "large": 2.0}


def scenarios() -> list[dict]:
    out = []
    for m in (1, 3, 5):
        for noise in ("normal", "heavy"):
            for truth in EFFECTS:
                out.append({"m": m, "noise": noise, "truth": truth, "loss": 0.0})
    for m in (1, 3):
        for truth in ("null", "medium", "large"):
            out.append({"m": m, "noise": "normal", "truth": truth, "loss": 0.1})
    return out


def _noise(rng, kind: str, shape) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape)
    return rng.standard_t(3, shape) / math.sqrt(3.0)


def simulate_one(rng, sc: dict, design: adaptive.Design) -> dict:
    """One sweep: values for max_seeds seeds of every arm; the adaptive engine uses a prefix, the fixed design
    all of it. Variant j's true difference: the scenario's effect for the first half (rounded up), 0 for the
    rest in a non-null scenario with m > 1 (a family with true nulls and true effects), all 0 in null."""
    m, n = sc["m"], design.max_seeds
    effect = EFFECTS[sc["truth"]]
    true = np.array([effect if j < max(1, (m + 1) // 2) else 0.0 for j in range(m)])
    shared = rng.standard_normal(n) * 3.0                                           # (n,) seed effect
    noise = _noise(rng, sc["noise"], (m + 1, n)) / math.sqrt(2)                     # (arms, n): diff sd 1
    values = shared[None, :] + noise + np.concatenate([[0.0], -true])[:, None]       # lower is better: -effect
    lost = rng.random((m + 1, n)) < sc["loss"]                                       # (arms, n)
    names = [f"v{j}" for j in range(m)]

    def stat(j: int, k: int) -> adaptive.LookStat:
        a, b = values[j + 1, :k], values[0, :k]
        la, lb = lost[j + 1, :k], lost[0, :k]
        if la.any() or lb.any():
            return adaptive.look_stat("independent", a[~la], b[~lb], int(la.sum()), int(lb.sum()), True)
        return adaptive.look_stat("paired", a, b)

    states = adaptive.start_states(design, names)
    runs = {name: 0 for name in names}
    base_runs = 0
    k = design.start
    while True:
        live = adaptive.still_open(states)
        if not live:
            break
        base_runs = k
        for name in live:
            runs[name] = k
        adaptive.decide_look(design, states, {name: stat(names.index(name), k) for name in live})
        if k >= design.max_seeds:
            break
        k = design.next_n(k)
    adaptive_rej = {name: states[name].status for name in names}
    # the fixed design at max_seeds: the fixed rule's tests and Holm
    p = [stat(j, n).pvalue for j in range(m)]
    adj = stats.holm(p)
    fixed = {}
    for j, name in enumerate(names):
        est = stat(j, n).estimate
        fixed[name] = ("better" if est < 0 else "worse") if adj[j] < design.alpha else "inconclusive"
    return {"true": true, "names": names, "adaptive": adaptive_rej, "fixed": fixed,
            "runs": base_runs + sum(runs.values()), "fixed_runs": adaptive.fixed_design_runs(design, m)}


def run_scenario(sc: dict, sweeps: int, seed: int, design: adaptive.Design) -> dict:
    rng = np.random.default_rng(seed)
    fwer = {"adaptive": 0, "fixed": 0}
    power = {"adaptive": [0, 0], "fixed": [0, 0]}
    runs = fixed_runs = 0
    for _ in range(sweeps):
        r = simulate_one(rng, sc, design)
        runs += r["runs"]
        fixed_runs += r["fixed_runs"]
        for how in ("adaptive", "fixed"):
            false = right = total = 0
            for name, t in zip(r["names"], r["true"]):
                v = r[how][name]
                if t == 0:
                    false += v in ("better", "worse")
                else:
                    total += 1
                    right += v == "better"
            fwer[how] += false > 0
            power[how][0] += right
            power[how][1] += total
    out = dict(sc, sweeps=sweeps,
               fwer_adaptive=fwer["adaptive"] / sweeps, fwer_fixed=fwer["fixed"] / sweeps,
               runs_adaptive=runs / sweeps, runs_fixed=fixed_runs / sweeps)
    for how in ("adaptive", "fixed"):
        out[f"power_{how}"] = power[how][0] / power[how][1] if power[how][1] else None
    out["saved"] = 1 - runs / fixed_runs
    return out


def summarize(rows: list[dict]) -> dict:
    nulls = [r for r in rows if r["truth"] == "null"]
    effects = [r for r in rows if r["truth"] != "null"]
    gap = max(r["power_fixed"] - r["power_adaptive"] for r in effects)
    return {"max_null_fwer": max(r["fwer_adaptive"] for r in nulls),
            "max_fwer_any": max(r["fwer_adaptive"] for r in rows),
            "max_power_gap": gap,
            "mean_saved_non_null": float(np.mean([r["saved"] for r in effects])),
            "targets": {"fwer <= 0.05 in every null scenario": max(r["fwer_adaptive"] for r in nulls) <= 0.05,
                        "power <= 3 points below fixed": gap <= 0.03,
                        ">= 30% fewer runs over non-null": float(np.mean([r["saved"] for r in effects])) >= 0.30}}


def markdown(rows: list[dict], summary: dict, design: adaptive.Design, seconds: float) -> str:
    lines = [f"# Adaptive seeds by simulation (`python benchmarks/adaptive_sim.py`)", "",
             f"Design: start {design.start}, batch {design.batch}, max_seeds {design.max_seeds}, alpha "
             f"{design.alpha}, {design.spending} spending, min_effect {design.min_effect} (sd of a paired "
             f"difference); {rows[0]['sweeps']} sweeps per scenario; {seconds:.0f} s.", "",
             "| variants | noise | truth | lost | FWER adaptive | FWER fixed | power adaptive | power fixed | "
             "runs adaptive | runs fixed | saved |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pw = lambda x: "-" if x is None else f"{x:.3f}"   # noqa: E731
        lines.append(f"| {r['m']} | {r['noise']} | {r['truth']} | {r['loss']} | {r['fwer_adaptive']:.3f} | "
                     f"{r['fwer_fixed']:.3f} | {pw(r['power_adaptive'])} | {pw(r['power_fixed'])} | "
                     f"{r['runs_adaptive']:.1f} | {r['runs_fixed']:.0f} | {r['saved']:.0%} |")
    lines += ["", f"- largest null FWER: {summary['max_null_fwer']:.3f}",
              f"- largest power gap (fixed - adaptive): {summary['max_power_gap']:.3f}",
              f"- mean runs saved over non-null scenarios: {summary['mean_saved_non_null']:.1%}"]
    lines += [f"- target {k}: {'met' if v else 'NOT met'}" for k, v in summary["targets"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="40 sweeps per scenario")
    p.add_argument("--sweeps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--spending", choices=adaptive.SPENDING, default=DESIGN.spending)
    args = p.parse_args(argv)
    design = dataclasses.replace(DESIGN, spending=args.spending)
    sweeps = args.sweeps or (40 if args.quick else 200)
    t0 = time.time()
    rows = []
    for i, sc in enumerate(scenarios()):
        rows.append(run_scenario(sc, sweeps, args.seed + 1000 * i, design))
        r = rows[-1]
        print(f"{sc}: fwer {r['fwer_adaptive']:.3f} (fixed {r['fwer_fixed']:.3f}) power "
              f"{r['power_adaptive']} (fixed {r['power_fixed']}) runs {r['runs_adaptive']:.1f}/{r['runs_fixed']:.0f}",
              flush=True)
    summary = summarize(rows)
    seconds = time.time() - t0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "adaptive_sim.json").write_text(json.dumps({"design": design.to_dict(), "rows": rows,
                                                       "summary": summary, "seconds": seconds}, indent=1))
    text = markdown(rows, summary, design, seconds)
    (out / "adaptive_sim.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
