"""How much power any exact permutation test gives up against the t-test in the two normal-noise cells that miss
issue 39's target (power within 3 points of the t-test), and what the candidate statistics do there.

    python benchmarks/exact_limit.py                            # the committed figures (benchmarks/results/)
    python benchmarks/exact_limit.py --reps 5000 --candidate-reps 300 --out /tmp/x   # a quick look

The cells: independent 5 vs 5 and paired 10 pairs, normal noise, one test at alpha / 3 = 0.0167 (Holm's first
step over 3 variants, the level that decides there) and at alpha 0.05. A test that keeps its level for any noise
law is a permutation test: conditional on the pooled values (on |d| when paired), it rejects a fixed share of the
arrangements. Under normal noise the most powerful such test is the permutation test of the mean difference (the
sign-flip test of the mean): the normal likelihood ratio of an arrangement grows with its mean difference. So
"limit" below, the exact permutation of means (sign-flip of the mean) against Student's t (paired t) on the same
draws, is the least any exact test gives up; the candidates can only add to it.

Candidates (every one an exact permutation test, min-p over the same arrangements where it combines two):
- independent: the deciding test (Welch's t of the pooled-Huber-clipped values, robust.independent_test) and the
  max-type of Welch's t of the raw values and of the clipped values;
- paired: the deciding test (max-type of t and one-step Huber t, k = robust.PAIRED_K), the same with k = 3, and an
  adaptive choice: the sign-flip test of t alone when the kurtosis of the symmetrised differences,
  n sum d^4 / (sum d^2)^2 (a function of |d|, the same under every flip, so the test stays exact), is below 2.6,
  else the max-type.
Writes benchmarks/results/exact_limit.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats as sps

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from benchmarks._results import write_results  # noqa: E402
from benchmarks.power_sim import _tm_paired, noise  # noqa: E402
from sweeper.analysis import robust  # noqa: E402

LEVELS = (0.05 / 3, 0.05)
TOL = robust._TOL
KURTOSIS_CUT = 2.6


def _share_at_least(stat: np.ndarray) -> np.ndarray:
    """Permutation p-value of the observed arrangement (row 0), per column.   stat: (S, C) -> (C,)"""
    return np.count_nonzero(stat >= stat[:1] * (1 - TOL), axis=0) / stat.shape[0]


def _min_p(s1: np.ndarray, s2: np.ndarray) -> float:
    """Max-type p-value of one column: min of the two permutation p-values, calibrated on the same arrangements."""
    c = np.minimum(robust._pvalues_within(s1), robust._pvalues_within(s2))
    return np.count_nonzero(c <= c[0] * (1 + TOL)) / c.size


def _clip(x: np.ndarray, k: float) -> np.ndarray:
    med = np.median(x, 0)
    s = np.median(np.abs(x - med), 0) / robust._MAD
    s = np.where(s > 0, s, x.std(0, ddof=1))
    return np.clip(x, med - k * s, med + k * s)


def independent(kind: str, effect: float, reps: int, candidates: bool, seed: int, n: int = 5) -> dict:
    rng = np.random.default_rng(seed)
    a, b = noise(rng, kind, (n, reps)) + effect, noise(rng, kind, (n, reps))
    x = np.concatenate([a, b])
    member, _ = robust.splits(2 * n, n)

    def welch(v):
        return np.abs(robust._welch_of_sums(member @ v, member @ (v * v), v.sum(0), (v * v).sum(0), n, n))
    p = {"Student t": sps.ttest_ind(a, b, axis=0).pvalue,
         "Mann-Whitney exact": sps.mannwhitneyu(a, b, axis=0, method="exact").pvalue,
         "permutation of means": _share_at_least(np.abs(member @ x - x.sum(0) / 2))}
    if candidates:
        raw, clipped = welch(x), welch(_clip(x, robust.INDEPENDENT_K))
        p["deciding test (clipped Welch t)"] = _share_at_least(clipped)
        p["max-type (raw, clipped Welch t)"] = np.array([_min_p(raw[:, j], clipped[:, j]) for j in range(reps)])
    return p


def paired(kind: str, effect: float, reps: int, candidates: bool, seed: int, n: int = 10) -> dict:
    d = noise(np.random.default_rng(seed), kind, (n, reps)) + effect
    signs = robust._signs(n)
    p = {"paired t": sps.ttest_1samp(d, 0, axis=0).pvalue, "Tukey-McLaughlin 20%": _tm_paired(d),
         "sign-flip of the mean": _share_at_least(np.abs(signs @ d))}
    if candidates:
        kept = robust.PAIRED_K
        out = {"flip t": [], "max-type k=2": [], "max-type k=3": []}
        try:
            for j in range(reps):
                for k, name in ((2.0, "max-type k=2"), (3.0, "max-type k=3")):
                    robust.PAIRED_K = k
                    t, h = robust._paired_stats(signs * d[:, j])
                    out[name].append(_min_p(t, h))
                out["flip t"].append(np.count_nonzero(t >= t[0] * (1 - TOL)) / t.size)
        finally:
            robust.PAIRED_K = kept
        kurt = n * (d ** 4).sum(0) / ((d * d).sum(0)) ** 2
        p["deciding test (max-type t, Huber t, k=2)"] = np.array(out["max-type k=2"])
        p["max-type t, Huber t, k=3"] = np.array(out["max-type k=3"])
        p[f"t alone if kurtosis < {KURTOSIS_CUT}, else max-type k=2"] = np.where(
            kurt < KURTOSIS_CUT, np.array(out["flip t"]), np.array(out["max-type k=2"]))
    return p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20_000, help="sweeps for the limit (normal noise, default 20000)")
    ap.add_argument("--candidate-reps", type=int, default=1_500, help="sweeps per candidate row (default 1500)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    if args.reps < 1 or args.candidate_reps < 1:
        print(f"--reps={args.reps} --candidate-reps={args.candidate_reps}: accepted values are positive integers",
              file=sys.stderr)
        return 2
    started = time.time()
    rows = []
    for design, fn in (("independent 5 vs 5", independent), ("paired 10 pairs", paired)):
        for kind, candidates in (("normal", False), ("normal", True), ("t3", True), ("outlier", True)):
            for effect in (0.8, 1.5):
                reps = args.candidate_reps if candidates else args.reps
                p = fn(kind, effect, reps, candidates, args.seed * 1000 + len(rows) + 1)
                for level in LEVELS:
                    power = {name: float(np.mean(np.nan_to_num(v, nan=1.0) < level)) for name, v in p.items()}
                    rows.append({"design": design, "noise": kind, "effect": effect, "level": level, "reps": reps,
                                 "candidates": candidates, "power": power})
                print(f"{design} {kind} d={effect} reps={reps}: "
                      f"{ {k: round(v, 3) for k, v in rows[-2]['power'].items()} }  {time.time() - started:.0f}s",
                      flush=True)
    command = "python benchmarks/exact_limit.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command.strip(), "seconds": time.time() - started, "rows": rows}
    md = ["# What exactness costs in the two normal-noise cells (benchmarks/exact_limit.py)", "",
          f"`{result['command']}`, {result['seconds']:.0f} s. One test per sweep at the level shown (alpha / 3 = "
          "0.0167 is Holm's first step over 3 variants). Rows without candidates: the limit, on "
          f"{args.reps} sweeps: no test exact for every noise law beats the permutation of means (sign-flip of "
          "the mean) under normal noise, so its gap to the t-test is the least any such test gives up. Other rows: "
          f"{args.candidate_reps} sweeps, every test on the same draws.", ""]
    for design in ("independent 5 vs 5", "paired 10 pairs"):
        for candidates in (False, True):
            group = [r for r in rows if r["design"] == design and r["candidates"] == candidates]
            names = list(group[0]["power"])
            md += [f"## {design}, {'candidates' if candidates else 'the limit (normal noise)'}, "
                   f"{group[0]['reps']} sweeps", "", "| noise | d | level | " + " | ".join(names) + " |",
                   "|---|---|---|" + "---|" * len(names)]
            md += [f"| {r['noise']} | {r['effect']} | {r['level']:.4f} | "
                   + " | ".join(f"{r['power'][k]:.3f}" for k in names) + " |" for r in group] + [""]
    write_results(Path(args.out), "exact_limit", result, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
