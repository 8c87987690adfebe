"""What the checks of classes 4, 7, 10, 11 (evaluation identity, determinism, code provenance, run isolation)
cost on the report of a 1,000-run sweep, each check alone, on the evidence a real run leaves: every run with an
evaluation fingerprint, its code record and an isolation.json, an A/A control (its curves compared with the
baseline's), 100 curve points per run.

    python benchmarks/bench_integrity_evidence.py              # 10 variants x 100 seeds; median of 3 repeats

The whole stage (every check) is timed by benchmarks/bench_integrity.py.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from sweeper.analysis.integrity import SweepEvidence  # noqa: E402
from sweeper.analysis.integrity.numbers.determinism import nondeterminism  # noqa: E402
from sweeper.analysis.integrity.records.evaluation import evaluation_identity, evaluation_varies_with_seed  # noqa: E402
from sweeper.analysis.integrity.records.isolation import shared_checkpoint, writes_outside_run_dir  # noqa: E402
from sweeper.analysis.integrity.records.provenance import mixed_code  # noqa: E402
from sweeper.analysis.results import (  # noqa: E402
    load_curves,
    load_experiment,
    load_manifest,
    load_runs,
    load_variant_changes,
)
from sweeper.run.files.isolation import IsolationRecord, write_isolation  # noqa: E402
from tests.helpers.synthetic_sweep import write_sweep  # noqa: E402

CHECKS = [evaluation_identity, evaluation_varies_with_seed, nondeterminism, mixed_code, shared_checkpoint,
          writes_outside_run_dir]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    variants = [f"v{i}" for i in range(args.variants)]
    finals = {v: list(1 + 0.01 * rng.normal(size=args.seeds)) for v in variants}
    code = {"eval_fingerprint": "e1", "code_commit": "a" * 40, "code_dirty": False, "script_sha256": "s1"}
    with tempfile.TemporaryDirectory() as tmp:
        root = write_sweep(Path(tmp) / "s", finals, baseline="v0", curve_points=100,
                           fingerprint={(v, s): code for v in variants for s in range(args.seeds)})
        for v in variants:
            for s in range(args.seeds):
                write_isolation(root / "runs" / v / f"seed_{s}", IsolationRecord(tmp, s, s + 0.5))
        manifest = load_manifest(root)
        exp, _ = load_experiment(root, manifest)
        exp = dataclasses.replace(exp, controls=["v1"])
        runs = load_runs(root, manifest)
        curves = load_curves(root, runs)
        changes, _ = load_variant_changes(root, manifest, exp.baseline)
        changes["v1"] = []                                  # v1 is the baseline's A/A control
        times: dict[str, list[float]] = {c.__name__: [] for c in CHECKS}
        for _ in range(args.repeats):
            ev = SweepEvidence(root, exp, runs, curves, changes)
            for check in CHECKS:
                t0 = time.perf_counter()
                check(ev)
                times[check.__name__].append(time.perf_counter() - t0)
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(runs)} runs, {len(curves)} curve rows; median of {args.repeats}")
    for name, t in median.items():
        print(f"  {name:28s} {1000 * t:7.1f} ms")
    print(f"  {'total':28s} {1000 * sum(median.values()):7.1f} ms")


if __name__ == "__main__":
    main()
