"""Power, family-wise error and coverage of the deciding test (sweeper.analysis.robust) beside scipy's standard tests
on the same simulated sweeps, and the published-data check on SAC vs TD3 (Colas, Sigaud, Oudeyer 2019).

    python benchmarks/power_sim.py --reps 400                         # every cell (the committed table)
    python benchmarks/power_sim.py --reps 20 --ns 3 5 --out /tmp/p    # a quick look
    python benchmarks/power_sim.py --ns 10 --designs paired --out /tmp/p   # some cells, the same draws as the table
    python benchmarks/power_sim.py --rl-data /work/data/rl_stats      # + SAC vs TD3 draws (not in the repo)

Cells: n = 3, 5, 10 seeds per arm x noise {normal, Student t 3 df (scale 1), outlier seeds (each seed, with
probability 0.1, has 10x the noise scale)} x design {independent, paired} x effect {0, 0.8, 1.5} (in units of the
clean noise scale) x family {1, 3 variants vs one baseline}, --reps sweeps per cell. Variant 1 carries the effect,
the others none; two-sided alpha 0.05, Holm over the family for every test. Independent: every arm is its own
noise draw. Paired: the paired differences (variant - baseline of one seed) follow the noise law, on top of a
seed offset shared by every arm. Oracles (scipy, same draws, same Holm): independent Student t, Welch t, Yuen 20%
(ttest_ind(trim=0.2)), Mann-Whitney exact, permutation of means (exact up to 20,000 splits, else the
same 10,000 fixed random splits as the deciding test); paired: paired t, Wilcoxon exact,
sign-flip of the mean (exact), Tukey-McLaughlin 20% trimmed (scipy trim_mean, winsorized variance, t with
n - 2g - 1 df). FWER: families with any false better/worse. Coverage: the deciding test accepts the true shift at
its Holm step's level (the decision interval is that test inverted, so this is the interval covering the truth).
Writes benchmarks/results/power_sim.{json,md}.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from benchmarks._results import write_results  # noqa: E402
from sweeper.analysis import robust, stats  # noqa: E402
from sweeper.analysis.verdict import _holm_levels  # noqa: E402

ALPHA = 0.05
NOISES = ("normal", "t3", "outlier")
EFFECTS = (0.0, 0.8, 1.5)
IND_ORACLES = ("Student t", "Welch t", "Yuen 20%", "Mann-Whitney exact", "permutation of means")
PAIR_ORACLES = ("paired t", "Wilcoxon exact", "sign-flip exact", "Tukey-McLaughlin 20%")


def noise(rng: np.random.Generator, kind: str, shape) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "t3":
        return rng.standard_t(3, shape)
    z = rng.standard_normal(shape)
    return np.where(rng.random(shape) < 0.1, 10.0 * z, z)


# ----------------------------------------------------------------------------- the deciding test, batched
def _independent_batch(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """robust.deciding_test p-values for columns of (a, b): a, b (n, C) -> (C,); the permutation branch by one
    matrix product over every split (checked against robust.deciding_test on the first columns)."""
    n = a.shape[0]
    if not robust.uses_permutation(False, n, n, m, ALPHA):
        return np.array([robust.deciding_test(a[:, j], b[:, j], False, m, ALPHA).pvalue for j in range(a.shape[1])])
    x = np.concatenate([a, b])                                                  # (2n, C)
    med = np.median(x, 0)
    s = np.median(np.abs(x - med), 0) / robust._MAD
    s = np.where(s > 0, s, x.std(0, ddof=1))
    x = np.clip(x, med - robust.INDEPENDENT_K * s, med + robust.INDEPENDENT_K * s)
    member, _ = robust.splits(2 * n, n)                                         # (S, 2n)
    out = np.empty(x.shape[1])
    total, total_sq = x.sum(0), (x * x).sum(0)
    for lo in range(0, x.shape[1], 64):
        cols = slice(lo, lo + 64)
        sa, qa = member @ x[:, cols], member @ (x[:, cols] ** 2)               # (S, c)
        t = np.abs(robust._welch_of_sums(sa, qa, total[cols], total_sq[cols], n, n))
        out[cols] = np.count_nonzero(t >= t[:1] * (1 - robust._TOL), axis=0) / t.shape[0]   # MC: (hits+1)/(B+1)
    return out


def deciding_p(a: np.ndarray, b: np.ndarray, paired: bool, m: int) -> np.ndarray:
    if paired:
        return np.array([robust.deciding_test(a[:, j], b[:, j], True, m, ALPHA).pvalue for j in range(a.shape[1])])
    return _independent_batch(a, b, m)


# ----------------------------------------------------------------------------- oracles (scipy)
def _tm_paired(d: np.ndarray) -> np.ndarray:
    """Tukey-McLaughlin 20% trimmed one-sample t on columns of d (n, C)."""
    n = d.shape[0]
    g = int(0.2 * n)
    tm = sps.trim_mean(d, 0.2, axis=0)
    w = np.asarray(sps.mstats.winsorize(d, limits=(0.2, 0.2), axis=0))
    se = np.sqrt(w.var(0, ddof=1)) / ((1 - 2 * g / n) * math.sqrt(n))
    return 2 * sps.t.sf(np.abs(tm) / se, n - 2 * g - 1)


def _perm_means(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = a.shape[0]
    x = np.concatenate([a, b])
    member, _ = robust.splits(2 * n, n)          # exact up to robust.MAX_EXACT_SPLITS, else 10,000 fixed ones
    out = np.empty(x.shape[1])
    for lo in range(0, x.shape[1], 64):
        cols = slice(lo, lo + 64)
        diff = np.abs(2 * (member @ x[:, cols]) - x[:, cols].sum(0)) / n          # |mean a - mean b|, (S, c)
        out[cols] = np.count_nonzero(diff >= diff[:1] * (1 - 1e-9), axis=0) / diff.shape[0]
    return out


def oracle_p(a: np.ndarray, b: np.ndarray, paired: bool) -> dict[str, np.ndarray]:
    """p-values of every oracle test for columns of (a, b): (n, C) -> name -> (C,)."""
    if paired:
        d = a - b
        signs = np.array([[stats.sign_flip_test(d[:, j], np.zeros(d.shape[0])).pvalue] for j in range(d.shape[1])])
        return {"paired t": sps.ttest_rel(a, b, axis=0).pvalue,
                "Wilcoxon exact": sps.wilcoxon(d, axis=0, method="exact").pvalue,
                "sign-flip exact": signs[:, 0], "Tukey-McLaughlin 20%": _tm_paired(d)}
    return {"Student t": sps.ttest_ind(a, b, axis=0).pvalue,
            "Welch t": sps.ttest_ind(a, b, axis=0, equal_var=False).pvalue,
            "Yuen 20%": sps.ttest_ind(a, b, axis=0, equal_var=False, trim=0.2).pvalue,
            "Mann-Whitney exact": sps.mannwhitneyu(a, b, axis=0, method="exact").pvalue,
            "permutation of means": _perm_means(a, b)}


# ----------------------------------------------------------------------------- one cell
def run_cell(design: str, n: int, kind: str, effect: float, m: int, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    paired = design == "paired"
    if paired:            # shared seed offset + per-variant differences following the noise law
        base = rng.standard_normal((reps, n)) * 3.0
        arms = base[:, None, :] + noise(rng, kind, (reps, m, n))
    else:
        base = noise(rng, kind, (reps, n))
        arms = noise(rng, kind, (reps, m, n))
    arms[:, 0, :] += effect
    a = arms.transpose(2, 0, 1).reshape(n, reps * m)                             # (n, reps*m), column r*m + j
    b = np.repeat(base.T, m, axis=1)
    tests = {"sweeper": deciding_p(a, b, paired, m)}
    tests.update(oracle_p(a, b, paired))
    truth = np.tile(np.arange(m) == 0, reps) & (effect > 0)                      # (reps*m,)
    out = {"design": design, "n": n, "noise": kind, "effect": effect, "m": m, "reps": reps}
    for name, p in tests.items():
        p = np.nan_to_num(np.asarray(p, float).reshape(reps, m), nan=1.0)
        adj = np.array([stats.holm(row) for row in p]) if m > 1 else p
        rejected = adj < ALPHA
        est_sign = np.sign(np.median(a - b, 0)).reshape(reps, m)
        false = rejected & ~truth.reshape(reps, m)
        out.setdefault("fwer", {})[name] = float(np.mean(false.any(1)))
        if effect > 0:
            out.setdefault("power", {})[name] = float(np.mean(rejected[:, 0] & (est_sign[:, 0] > 0)))
    # coverage: the deciding test at the true shift, at each comparison's Holm step level (as verdict fixes it)
    shifted = deciding_p(a - effect * truth[None, :], b, paired, m).reshape(reps, m)
    p = np.nan_to_num(tests["sweeper"].reshape(reps, m), nan=1.0)
    covered = 0
    for r in range(reps):
        levels = [lv for lv, _ in _holm_levels(list(p[r]), ALPHA)]
        covered += int(np.sum(shifted[r] >= np.array(levels)))
    out["coverage"] = covered / (reps * m)
    out["fwer_high95"] = _wilson_high(round(out["fwer"]["sweeper"] * reps), reps)
    return out


def _wilson_high(k: int, n: int, z: float = 1.96) -> float:
    p = k / n
    return (p + z * z / (2 * n) + z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / (1 + z * z / n)


# ----------------------------------------------------------------------------- published data: SAC vs TD3
def rl_check(folder: Path, draws: int, seed: int) -> list[dict]:
    """Draws of n runs per algorithm (without replacement) from the 192 + 193 published final returns: the share
    called "SAC better" by the deciding test, Welch's t and exact Mann-Whitney (independent design, one comparison)."""
    sac = np.loadtxt(folder / "sac_hc_final_perfs.txt")
    td3 = np.loadtxt(folder / "td3_hc_final_perfs.txt")
    rng = np.random.default_rng(seed)
    rows = []
    for n in (5, 10, 20):
        a = np.stack([rng.choice(sac, n, replace=False) for _ in range(draws)], 1)      # (n, draws)
        b = np.stack([rng.choice(td3, n, replace=False) for _ in range(draws)], 1)
        ours = (deciding_p(a, b, False, 1) if n <= 10 else
                np.array([robust.deciding_test(a[:, j], b[:, j], False).pvalue for j in range(draws)]))
        up = a.mean(0) > b.mean(0)
        hl = np.array([np.median(a[:, j][:, None] - b[:, j][None, :]) for j in range(draws)]) > 0
        rows.append({"n": n, "draws": draws, "sac_runs": int(sac.size), "td3_runs": int(td3.size),
                     "sweeper": float(np.mean((ours < ALPHA) & hl)),
                     "Welch t": float(np.mean((sps.ttest_ind(a, b, axis=0, equal_var=False).pvalue < ALPHA) & up)),
                     "Mann-Whitney exact": float(np.mean((sps.mannwhitneyu(a, b, axis=0, method="exact").pvalue
                                                          < ALPHA) & hl))})
        print(f"SAC vs TD3, {n} runs each: called better by sweeper {rows[-1]['sweeper']:.3f}, Welch "
              f"{rows[-1]['Welch t']:.3f}, Mann-Whitney {rows[-1]['Mann-Whitney exact']:.3f}", flush=True)
    return rows


# ----------------------------------------------------------------------------- report
def _f(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def summarize(cells: list[dict]) -> dict:
    nulls = [c for c in cells if c["effect"] == 0]
    gaps, normal_gaps = [], []
    for c in cells:
        if c["effect"] == 0:
            continue
        oracles = {k: v for k, v in c["power"].items() if k != "sweeper"}
        best = max(oracles, key=oracles.get)
        c["best_oracle"], c["gap_best"] = best, oracles[best] - c["power"]["sweeper"]
        gaps.append(c["gap_best"])
        if c["noise"] == "normal":
            t = c["power"]["paired t" if c["design"] == "paired" else "Student t"]
            c["gap_t"] = t - c["power"]["sweeper"]
            normal_gaps.append(c["gap_t"])
    return {"fwer_max": max(c["fwer"]["sweeper"] for c in nulls),
            "fwer_max_any_cell": max(c["fwer"]["sweeper"] for c in cells),
            "coverage_min": min(c["coverage"] for c in cells),
            "gap_best_max": max(gaps), "gap_t_normal_max": max(normal_gaps)}


def markdown(result: dict) -> list[str]:
    s = result["summary"]
    md = ["# Power of the deciding test beside scipy's tests (benchmarks/power_sim.py)", "",
          f"`{result['command']}`: {result['reps']} simulated sweeps per cell, two-sided alpha {ALPHA}, Holm over "
          f"the family, {result['seconds']:.0f} s. sweeper = sweeper.analysis.robust.deciding_test (the t-test where "
          "no permutation test can reach alpha/m, else the robust permutation test). Power: variant 1 called in the "
          "right direction. FWER: any false better/worse (95% Wilson upper bound). Coverage: the decision interval "
          "(the test inverted at its Holm step's level) holds the true shift.", "",
          "| design | n | noise | effect | m | sweeper power | best oracle (power) | t power | gap to best | "
          "FWER [95% up] | coverage |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in result["cells"]:
        t_name = "paired t" if c["design"] == "paired" else "Student t"
        if c["effect"]:
            md.append(f"| {c['design']} | {c['n']} | {c['noise']} | {c['effect']} | {c['m']} | "
                      f"{_f(c['power']['sweeper'])} | {c['best_oracle']} ({_f(c['power'][c['best_oracle']])}) | "
                      f"{_f(c['power'][t_name])} | {c['gap_best']:+.3f} | {_f(c['fwer']['sweeper'])} "
                      f"[{_f(c['fwer_high95'])}] | {_f(c['coverage'])} |")
        else:
            worst = max((k for k in c["fwer"] if k != "sweeper"), key=c["fwer"].get)
            md.append(f"| {c['design']} | {c['n']} | {c['noise']} | 0 | {c['m']} | - | - | - | - | "
                      f"{_f(c['fwer']['sweeper'])} [{_f(c['fwer_high95'])}] (max oracle {worst} "
                      f"{_f(c['fwer'][worst])}) | {_f(c['coverage'])} |")
    md += ["", f"- largest FWER in a null cell: {_f(s['fwer_max'])} (target <= 0.05 within Monte Carlo error, "
               f"se {math.sqrt(0.05 * 0.95 / result['reps']):.3f} at 0.05)",
           f"- smallest coverage: {_f(s['coverage_min'])} (target >= 0.93)",
           f"- largest power gap to the best oracle: {s['gap_best_max']:+.3f} (target <= 0.05)",
           f"- largest power gap to the t-test under normal noise: {s['gap_t_normal_max']:+.3f} (target <= 0.03)"]
    if result.get("rl"):
        md += ["", "## Published data: SAC vs TD3 on Half-Cheetah (Colas, Sigaud, Oudeyer 2019)", "",
               f"Final returns from github.com/ccolas/rl_stats (data/*_hc_final_perfs.txt: "
               f"{result['rl'][0]['sac_runs']} SAC, {result['rl'][0]['td3_runs']} TD3 runs); random draws of n runs "
               "per algorithm without replacement; share of draws called \"SAC better\" at alpha 0.05.", "",
               "| n per algorithm | draws | sweeper | Welch t | Mann-Whitney exact |", "|---|---|---|---|---|"]
        md += [f"| {r['n']} | {r['draws']} | {_f(r['sweeper'])} | {_f(r['Welch t'])} | {_f(r['Mann-Whitney exact'])} |"
               for r in result["rl"]]
    return md


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400, help="simulated sweeps per cell (default 400)")
    ap.add_argument("--ns", type=int, nargs="+", default=[3, 5, 10])
    ap.add_argument("--designs", nargs="+", choices=("independent", "paired"), default=["independent", "paired"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rl-data", default=None, help="folder holding ccolas/rl_stats' data/*_hc_final_perfs.txt")
    ap.add_argument("--rl-draws", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    if args.reps < 1:
        print(f"--reps={args.reps}: accepted values are positive integers", file=sys.stderr)
        return 2
    started = time.time()
    cells = []
    grid_ns = [3, 5, 10] + [n for n in args.ns if n not in (3, 5, 10)]   # a cell's draws: its place in the full grid
    i = 0
    for design in ("independent", "paired"):
        for n in grid_ns:
            for kind in NOISES:
                for effect in EFFECTS:
                    for m in (1, 3):
                        i += 1
                        if design not in args.designs or n not in args.ns:
                            continue
                        c = run_cell(design, n, kind, effect, m, args.reps, args.seed * 10_000 + i)
                        cells.append(c)
                        print(f"{design} n={n} {kind} d={effect} m={m}: sweeper power "
                              f"{_f(c.get('power', {}).get('sweeper'))} fwer {_f(c['fwer']['sweeper'])} coverage "
                              f"{_f(c['coverage'])}  oracles {c.get('power', c['fwer'])}  {time.time() - started:.0f}s",
                              flush=True)
    rl = rl_check(Path(args.rl_data), args.rl_draws, args.seed) if args.rl_data else []
    command = "python benchmarks/power_sim.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command.strip(), "reps": args.reps, "seed": args.seed, "alpha": ALPHA, "ns": args.ns,
              "seconds": time.time() - started, "cells": cells, "rl": rl}
    result["summary"] = summarize(cells)
    md = markdown(result)
    write_results(Path(args.out), "power_sim", result, md)
    print("\n".join(md[-4:] if not rl else md[-12:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
