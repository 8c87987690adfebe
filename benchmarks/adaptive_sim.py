"""Adaptive seeds by simulation: family-wise error, power and runs of the real decision code (sweeper.adaptive)
against the fixed design at max_seeds (sweeper.analysis.robust.deciding_test / worst-rank test + Holm, as
sweeper.analysis.verdict decides).

    python benchmarks/adaptive_sim.py --sweeps 600 --null-sweeps 3000 --workers 2   # the committed table (24 min)
    python benchmarks/adaptive_sim.py                  # every scenario: 2000 sweeps, 20000 null (about 2.5 h)
    python benchmarks/adaptive_sim.py --quick          # 40 sweeps per scenario
    python benchmarks/adaptive_sim.py --sweeps 2000 --max-seeds 9 --out /tmp/x   # another design

Truth is known: per seed, each arm's value = seed effect (shared by every arm: what pairing cancels) + the
arm's true difference + noise (normal, or Student t with 3 df scaled to unit sd: heavy tails). Effects are in
units of the sd of a paired difference: small 0.5 (half of min_effect: below what matters, yet the fixed design
often detects it), medium 1.0 (= min_effect, the smallest effect that matters), large 2.0. Lost seeds: each run
fails with probability 0.1 (it then counts against its arm, as in the fixed design). In a non-null scenario
with m > 1 variants, the first half (rounded up) have the effect and the others none (a family with true
nulls and true effects). Default design: start 4, batch 2, max_seeds 16, alpha 0.05, Hwang-Shih-DeCani
spending with gamma -6 (the recommended defaults; --start/--batch/--max-seeds/--spending try others).

The fixed and the adaptive design see the same values in one sweep (common random numbers), so the power
gap (fixed - adaptive) is reported with the standard error of its paired mean over sweeps. Every comparison
that the fixed design rejects and the adaptive one does not is attributed to where the adaptive one stopped:
"no effect" or "inconclusive at budget" (futility) at look k, or never crossed by max_seeds. Runs saved are
split by what stopped each arm: efficacy (a crossed boundary), futility, or the baseline (whose seeds stop
with the last open comparison). Writes benchmarks/results/adaptive_sim.{json,md}.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweeper.adaptive import design as adaptive  # noqa: E402
from sweeper.analysis import robust, stats

DESIGN = adaptive.Design(alpha=0.05, start=4, batch=2, max_seeds=16, min_effect=1.0, spending="hsd",
                         lower_is_better=True)
EFFECTS = {"null": 0.0, "small": 0.5, "medium": 1.0, "large": 2.0}
DEFAULT_SWEEPS = 2000
DEFAULT_NULL_SWEEPS = 20_000   # null scenarios: the FWER target needs its Monte Carlo se small (0.0015 at 0.05)


def scenarios() -> list[dict]:
    out = []
    for m in (1, 3, 5):
        for noise in ("normal", "heavy"):
            for truth in EFFECTS:
                out.append({"m": m, "noise": noise, "truth": truth, "loss": 0.0})
    for m in (1, 3):
        for truth in EFFECTS:
            out.append({"m": m, "noise": "normal", "truth": truth, "loss": 0.1})
    return out


def _noise(rng, kind: str, shape) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape)
    return rng.standard_t(3, shape) / math.sqrt(3.0)


def simulate_one(rng, sc: dict, design: adaptive.Design) -> dict:
    """One sweep: values for max_seeds seeds of every arm; the adaptive engine uses a prefix, the fixed design
    all of it."""
    m, n = sc["m"], design.max_seeds
    effect = EFFECTS[sc["truth"]]
    true = np.array([effect if j < max(1, (m + 1) // 2) else 0.0 for j in range(m)])
    shared = rng.standard_normal(n) * 3.0                                           # (n,) seed effect
    noise = _noise(rng, sc["noise"], (m + 1, n)) / math.sqrt(2)                     # (arms, n): diff sd 1
    values = shared[None, :] + noise + np.concatenate([[0.0], -true])[:, None]       # lower is better: -effect
    lost = rng.random((m + 1, n)) < sc["loss"]                                       # (arms, n)
    names = [f"v{j}" for j in range(m)]

    def stat(j: int, k: int, level: adaptive.Level | None = None) -> adaptive.LookStat:
        a, b = values[j + 1, :k], values[0, :k]
        la, lb = lost[j + 1, :k], lost[0, :k]
        if la.any() or lb.any():
            return adaptive.look_stat("independent", a[~la], b[~lb], int(la.sum()), int(lb.sum()), True)
        if level is None:        # the fixed design: its own test at alpha / m (robust where its floor reaches it)
            fixed = adaptive.Level(design.alpha / m, robust.uses_permutation(True, k, k, m, design.alpha))
            return adaptive.look_stat("paired", a, b, level=fixed)
        return adaptive.look_stat("paired", a, b, level=level)

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
        looks = {name: stat(names.index(name), k, adaptive.next_level(design, states[name], k, paired=True))
                 for name in live}
        adaptive.decide_look(design, states, looks)
        if k >= design.max_seeds:
            break
        k = design.next_n(k)
    # the fixed design at max_seeds: the fixed rule's tests and Holm
    final = [stat(j, n) for j in range(m)]
    adj = stats.holm([s.pvalue for s in final])
    fixed = {name: (("better" if final[j].estimate < 0 else "worse") if adj[j] < design.alpha else "inconclusive")
             for j, name in enumerate(names)}
    return {"true": true, "names": names, "states": states, "fixed": fixed, "runs_arm": runs,
            "runs_base": base_runs, "runs": base_runs + sum(runs.values()),
            "fixed_runs": adaptive.fixed_design_runs(design, m)}


def run_scenario(sc: dict, sweeps: int, seed: int, design: adaptive.Design) -> dict:
    rng = np.random.default_rng(seed)
    last_look = len(design.schedule())
    fwer = {"adaptive": 0, "fixed": 0}
    right = {"adaptive": 0, "fixed": 0}
    total = 0
    gaps = []                     # per sweep: (fixed - adaptive) correct rejections / true effects
    lost_power, won_power = Counter(), Counter()
    saved_by = Counter()          # runs saved: efficacy / futility / baseline
    runs = fixed_runs = 0
    for _ in range(sweeps):
        r = simulate_one(rng, sc, design)
        runs += r["runs"]
        fixed_runs += r["fixed_runs"]
        saved_by["baseline"] += design.max_seeds - r["runs_base"]
        false = {"adaptive": 0, "fixed": 0}
        hits = {"adaptive": 0, "fixed": 0}
        effects = 0
        for name, t in zip(r["names"], r["true"]):
            s = r["states"][name]
            saved = design.max_seeds - r["runs_arm"][name]
            if saved:
                saved_by["efficacy" if s.status in (adaptive.BETTER, adaptive.WORSE) else "futility"] += saved
            verdicts = {"adaptive": s.status, "fixed": r["fixed"][name]}
            if t == 0:
                for how in verdicts:
                    false[how] += verdicts[how] in ("better", "worse")
                continue
            effects += 1
            for how in verdicts:
                hits[how] += verdicts[how] == "better"
            if verdicts["fixed"] == "better" and s.status != "better":
                k = len(s.looks)
                if s.status == adaptive.WORSE:
                    why = "wrong direction"
                elif k >= last_look and s.n >= design.max_seeds:
                    why = "not crossed by max_seeds" if s.status == adaptive.BUDGET else "no effect at max_seeds"
                else:
                    why = f"{'no effect' if s.status == adaptive.NO_EFFECT else 'futility (power)'} at look {k}"
                lost_power[why] += 1
            elif verdicts["fixed"] != "better" and s.status == "better":
                won_power[f"crossed at look {len(s.looks)}"] += 1
        for how in fwer:
            fwer[how] += false[how] > 0
            right[how] += hits[how]
        total += effects
        if effects:
            gaps.append((hits["fixed"] - hits["adaptive"]) / effects)
    out = dict(sc, sweeps=sweeps,
               fwer_adaptive=fwer["adaptive"] / sweeps, fwer_fixed=fwer["fixed"] / sweeps,
               runs_adaptive=runs / sweeps, runs_fixed=fixed_runs / sweeps)
    for how in ("adaptive", "fixed"):
        out[f"power_{how}"] = right[how] / total if total else None
    out["gap"] = float(np.mean(gaps)) if gaps else None
    out["gap_se"] = float(np.std(gaps, ddof=1) / math.sqrt(len(gaps))) if len(gaps) > 1 else None
    out["saved"] = 1 - runs / fixed_runs
    out["saved_by"] = {k: v / fixed_runs for k, v in sorted(saved_by.items())}
    out["lost_power"] = {k: v / total for k, v in sorted(lost_power.items())} if total else {}
    out["won_power"] = {k: v / total for k, v in sorted(won_power.items())} if total else {}
    return out


def summarize(rows: list[dict]) -> dict:
    nulls = [r for r in rows if r["truth"] == "null"]
    effects = [r for r in rows if r["truth"] != "null"]
    worst = max(effects, key=lambda r: r["gap"])
    saved = float(np.mean([r["saved"] for r in effects]))
    lost = Counter()
    for r in effects:
        for k, v in r["lost_power"].items():
            lost[k] += v / len(effects)
    return {"max_null_fwer": max(r["fwer_adaptive"] for r in nulls),
            "max_fwer_any": max(r["fwer_adaptive"] for r in rows),
            "max_power_gap": worst["gap"], "max_power_gap_se": worst["gap_se"],
            "max_power_gap_scenario": {k: worst[k] for k in ("m", "noise", "truth", "loss")},
            "mean_saved_non_null": saved,
            "mean_lost_power_by_cause": dict(sorted(lost.items(), key=lambda kv: -kv[1])),
            "targets": {"fwer <= 0.05 in every null scenario": max(r["fwer_adaptive"] for r in nulls) <= 0.05,
                        "power <= 3 points below fixed": worst["gap"] <= 0.03,
                        ">= 30% fewer runs over non-null": saved >= 0.30}}


def _sweeps_text(rows: list[dict]) -> str:
    null = sorted({r["sweeps"] for r in rows if r["truth"] == "null"})
    other = sorted({r["sweeps"] for r in rows if r["truth"] != "null"})
    if null == other:
        return f"{other[0]} sweeps per scenario"
    return (f"{'/'.join(map(str, other))} sweeps per scenario, {'/'.join(map(str, null))} per null scenario "
            f"(FWER Monte Carlo se {math.sqrt(0.05 * 0.95 / min(null)):.4f} at 0.05)")


def markdown(rows: list[dict], summary: dict, design: adaptive.Design, seconds: float, command: str) -> str:
    lines = [f"# Adaptive seeds by simulation (`{command}`)", "",
             f"Design: start {design.start}, batch {design.batch}, max_seeds {design.max_seeds} (looks at "
             f"{design.schedule()}), alpha {design.alpha}, {design.spending} spending, min_effect "
             f"{design.min_effect} (sd of a paired difference); {_sweeps_text(rows)}; "
             f"{seconds:.0f} s. Gap = power fixed - power adaptive (paired over the same sweeps, +- its Monte "
             "Carlo standard error). Saved by: efficacy stops / futility stops / the baseline's seeds.", "",
             "| variants | noise | truth | lost | FWER adaptive | FWER fixed | power adaptive | power fixed | "
             "gap (+- se) | runs adaptive | runs fixed | saved | saved by eff / fut / base |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pw = lambda x: "-" if x is None else f"{x:.3f}"   # noqa: E731
        gap = "-" if r["gap"] is None else f"{r['gap']:+.3f} +- {r['gap_se']:.3f}"
        sb = r["saved_by"]
        lines.append(f"| {r['m']} | {r['noise']} | {r['truth']} | {r['loss']} | {r['fwer_adaptive']:.3f} | "
                     f"{r['fwer_fixed']:.3f} | {pw(r['power_adaptive'])} | {pw(r['power_fixed'])} | {gap} | "
                     f"{r['runs_adaptive']:.1f} | {r['runs_fixed']:.0f} | {r['saved']:.0%} | "
                     f"{sb.get('efficacy', 0):.0%} / {sb.get('futility', 0):.0%} / {sb.get('baseline', 0):.0%} |")
    ws = summary["max_power_gap_scenario"]
    lines += ["", f"- largest null FWER: {summary['max_null_fwer']:.3f}",
              f"- largest power gap (fixed - adaptive): {summary['max_power_gap']:.3f} +- "
              f"{summary['max_power_gap_se']:.3f} ({ws['m']} variant(s), {ws['noise']}, {ws['truth']}, lost "
              f"{ws['loss']})",
              f"- mean runs saved over non-null scenarios: {summary['mean_saved_non_null']:.1%}",
              "- power lost (fixed rejects, adaptive does not), mean over non-null scenarios, by where the adaptive "
              "comparison stopped: " + (", ".join(f"{k} {v:.3f}" for k, v in
                                                   summary["mean_lost_power_by_cause"].items()) or "none")]
    lines += [f"- target {k}: {'met' if v else 'NOT met'}" for k, v in summary["targets"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="40 sweeps per scenario")
    p.add_argument("--sweeps", type=int, default=None, help=f"sweeps per scenario (default {DEFAULT_SWEEPS})")
    p.add_argument("--null-sweeps", type=int, default=None,
                   help=f"sweeps per null scenario (default {DEFAULT_NULL_SWEEPS}; with --sweeps or --quick: the same)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--spending", choices=adaptive.SPENDING, default=DESIGN.spending)
    p.add_argument("--start", type=int, default=DESIGN.start)
    p.add_argument("--batch", type=int, default=DESIGN.batch)
    p.add_argument("--max-seeds", type=int, default=DESIGN.max_seeds)
    p.add_argument("--only", default=None, help="run only scenarios whose 'm/noise/truth/loss' contains this")
    p.add_argument("--workers", type=int, default=1, help="scenarios run in this many processes at once")
    args = p.parse_args(argv)
    design = dataclasses.replace(DESIGN, spending=args.spending, start=args.start, batch=args.batch,
                                 max_seeds=args.max_seeds)
    sweeps = args.sweeps or (40 if args.quick else DEFAULT_SWEEPS)
    null_sweeps = args.null_sweeps or (sweeps if args.sweeps or args.quick else DEFAULT_NULL_SWEEPS)
    command = "python benchmarks/adaptive_sim.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])
                                                     if (argv if argv is not None else sys.argv[1:]) else "")
    t0 = time.time()
    todo = [(sc, null_sweeps if sc["truth"] == "null" else sweeps, args.seed + 1000 * i, design)
            for i, sc in enumerate(scenarios())
            if not args.only or args.only in f"{sc['m']}/{sc['noise']}/{sc['truth']}/{sc['loss']}"]
    with ProcessPoolExecutor(args.workers) if args.workers > 1 else contextlib.nullcontext() as pool:
        rows = []
        for r in (pool.map if pool else map)(run_scenario, *zip(*todo)) if todo else ():
            rows.append(r)
            gap = "" if r["gap"] is None else f" gap {r['gap']:+.3f}+-{r['gap_se']:.3f}"
            print(f"{ {k: r[k] for k in ('m', 'noise', 'truth', 'loss')} }: fwer {r['fwer_adaptive']:.3f} (fixed "
                  f"{r['fwer_fixed']:.3f}) power {r['power_adaptive']} (fixed {r['power_fixed']}){gap} saved "
                  f"{r['saved']:.1%} lost { {k: round(v, 3) for k, v in r['lost_power'].items()} }", flush=True)
    seconds = time.time() - t0
    if not any(r["truth"] == "null" for r in rows) or all(r["truth"] == "null" for r in rows):
        return 0
    summary = summarize(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "adaptive_sim.json").write_text(json.dumps({"design": design.to_dict(), "command": command,
                                                       "rows": rows, "summary": summary, "seconds": seconds},
                                                      indent=1))
    text = markdown(rows, summary, design, seconds, command)
    (out / "adaptive_sim.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
