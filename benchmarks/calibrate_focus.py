"""`python benchmarks/calibrate_focus.py [--scenario NAME] [--n 10 3] [--reps 3000] [--seed 7]`: one calibration
scenario of benchmarks/calibrate.py with many more simulated sweeps, to tell a real excess of the family-wise
error from Monte Carlo noise (300 sweeps per cell give a 95% band of about +-0.025 around 0.05).

Default: the scenario whose FWER read highest in the default run ("null, normal, paired, 3 comparisons").
Prints one line per n (FWER with its 95% Wilson upper bound, coverage of the shown decision interval).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

from benchmarks.calibrate import SCENARIOS, run_cell  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="null, normal, paired, 3 comparisons",
                    choices=[s.name for s in SCENARIOS], metavar="NAME", help="a scenario name of calibrate.py")
    ap.add_argument("--n", type=int, nargs="+", default=[10, 3], help="seeds per arm (default 10 3)")
    ap.add_argument("--reps", type=int, default=3000, help="simulated sweeps per n (default 3000)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    sc = next(s for s in SCENARIOS if s.name == args.scenario)
    t0 = time.time()
    for n in args.n:
        cell = run_cell(sc, n, args.reps, np.random.default_rng(args.seed), 100)
        print(f"{sc.name} n={n}: FWER {cell['fwer']:.4f} (95% upper {cell['fwer_high95']:.4f}) over {cell['reps']} "
              f"sweeps, coverage {cell['coverage']:.4f}", flush=True)
    print(f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
