"""Report scale benchmark: 1,000 runs (10 variants x 100 seeds, 200 curve points each), real files on disk.

    python benchmarks/bench_report.py                 # target: report without plots under 5 s on 2 cores
    python benchmarks/bench_report.py --variants 3 --seeds 4 --points 50 --plots

Writes a synthetic sweep dir (tests/synthetic_sweep.py, same files the trainer writes) to a temp folder, then
times each stage of `report_sweep(plots=False)`: load runs, load curves, statistics (10,000 bootstrap resamples,
vectorised), writing report.md and summary.csv. Side by side in the same run: the vectorised bootstrap of one
100 vs 100 comparison against the same resampling done with a Python loop per resample (the ratio is the point).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from sweeper.analysis import stats  # noqa: E402
from sweeper.analysis.analyze import analyze_sweep
from sweeper.analysis.results import load_curves, load_manifest, load_runs  # noqa: E402
from sweeper.config.decision import DecisionOptions  # noqa: E402
from sweeper.report.write import write_report  # noqa: E402
from tests.helpers.synthetic_sweep import write_sweep  # noqa: E402


def _timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def loop_bootstrap(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The naive way: one Python iteration per resample (what the vectorised code avoids)."""
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    for r in range(n_resamples):
        ia, ib = rng.integers(0, a.size, a.size), rng.integers(0, b.size, b.size)
        out[r] = a[ia].mean() - b[ib].mean()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", type=int, default=10)
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--points", type=int, default=200)
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--plots", action="store_true", help="also time the three PNG plots")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    finals = {f"v{i}": list(3.0 + 0.004 * i + 0.02 * rng.standard_normal(args.seeds)) for i in range(args.variants)}
    with tempfile.TemporaryDirectory() as tmp:
        root, t_write = _timed(write_sweep, Path(tmp) / "sweep", finals, curve_points=args.points, eval_every=10)
        n_runs = args.variants * args.seeds
        print(f"synthetic sweep: {n_runs} runs x {args.points} curve points written in {t_write:.1f} s")

        runs, t_runs = _timed(lambda: load_runs(root, load_manifest(root)))
        curves, t_curves = _timed(load_curves, root, runs)
        print(f"  load_runs    {t_runs:6.2f} s   ({len(runs)} rows)")
        print(f"  load_curves  {t_curves:6.2f} s   ({len(curves):,} rows)")

        inp, t_all = _timed(analyze_sweep, root, DecisionOptions(n_resamples=args.resamples))
        t_stats = t_all - t_runs - t_curves
        print(f"  statistics   {t_stats:6.2f} s   ({len(inp.analysis.comparisons)} comparisons, "
              f"{args.resamples} resamples; load + stats {t_all:.2f} s)")
        _, t_write_report = _timed(write_report, inp, root, plots=False)
        total = t_all + t_write_report
        print(f"  write report {t_write_report:6.2f} s")
        print(f"report without plots: {total:.2f} s for {n_runs} runs (target < 5 s): "
              f"{'OK' if total < 5 else 'OVER TARGET'}")
        if args.plots:
            from sweeper.report.plots import write_plots

            _, t_plots = _timed(write_plots, root / "plots", inp.curves, inp.analysis)
            print(f"plots: {t_plots:.2f} s")

    a, b = rng.normal(3.0, 0.02, 100), rng.normal(3.01, 0.02, 100)
    _, t_vec = _timed(stats.bootstrap_delta, a, b, n_resamples=args.resamples, seed=1)
    _, t_loop = _timed(loop_bootstrap, a, b, args.resamples, 1)
    print(f"bootstrap of one 100 vs 100 comparison, {args.resamples} resamples: vectorised {t_vec * 1e3:.0f} ms "
          f"(BCa + P(better) included) vs loop per resample {t_loop * 1e3:.0f} ms: {t_loop / t_vec:.1f}x")


if __name__ == "__main__":
    main()
