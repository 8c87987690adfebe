"""What the checks across runs add to the report of a 1,000-run sweep: the same report with and without the
integrity stage, side by side in one run (alternating, median of the repeats), ratio and added seconds.

    python benchmarks/bench_integrity.py                  # 10 variants x 100 seeds, 100 curve points; target <= 1 s
    python benchmarks/bench_integrity.py --repeats 5 --out benchmarks/results

The sweep is synthetic (tests/helpers/synthetic_sweep.py: the files a real run writes) and has copies in it: one
variant's finals equal the baseline's at every seed (its curves differ), so change_no_effect reads the curves, and
every check runs its full path. "Without" empties sweeper.analysis.integrity.CHECKS for the timed call; the stage
alone (check_sweep and sweep_coverage, as analyze runs them, on a fresh evidence object) is timed too. Each
figure is given in wall seconds and in CPU seconds of this process (time.process_time): on a shared, loaded
machine the wall figures are noise, the CPU figures are the cost.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import sweeper.analysis.integrity as integrity  # noqa: E402
from benchmarks._results import write_results  # noqa: E402
from sweeper.analysis.analyze import analyze_sweep  # noqa: E402
from sweeper.analysis.results import load_variant_changes  # noqa: E402
from sweeper.config.decision import DecisionOptions  # noqa: E402
from sweeper.report.write import write_report  # noqa: E402
from tests.helpers.synthetic_sweep import write_sweep  # noqa: E402


def report(root: Path, resamples: int, checks: list) -> tuple[float, float, int]:
    """Wall and CPU seconds for analyze_sweep + write_report (no plots) with `checks` as the registered checks;
    findings."""
    saved = list(integrity.CHECKS)
    integrity.CHECKS[:] = checks
    try:
        t, c = time.perf_counter(), time.process_time()
        inp = analyze_sweep(root, DecisionOptions(n_resamples=resamples))
        write_report(inp, root, plots=False)
        return time.perf_counter() - t, time.process_time() - c, len(inp.findings)
    finally:
        integrity.CHECKS[:] = saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", type=int, default=10)
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--points", type=int, default=100)
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None, help="write bench_integrity.json/.md into this folder")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    finals = {f"v{i}": list(3.0 + 0.004 * i + 0.02 * rng.standard_normal(args.seeds)) for i in range(args.variants)}
    finals["v1"] = list(finals["v0"])                   # copies of the baseline's finals: the curve path runs
    n_runs = args.variants * args.seeds
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        root = write_sweep(Path(tmp) / "sweep", finals, curve_points=args.points, eval_every=10)
        print(f"synthetic sweep: {n_runs} runs x {args.points} curve points written in {time.perf_counter() - t:.1f} s")
        report(root, args.resamples, list(integrity.CHECKS))          # warm: imports, the manifest cache
        with_s, without_s, with_cpu, without_cpu, found = [], [], [], [], 0
        for _ in range(args.repeats):
            s, cpu, found = report(root, args.resamples, list(integrity.CHECKS))
            with_s.append(s)
            with_cpu.append(cpu)
            s, cpu, _ = report(root, args.resamples, [])
            without_s.append(s)
            without_cpu.append(cpu)
        inp = analyze_sweep(root, DecisionOptions(n_resamples=200))
        changes, _ = load_variant_changes(root, inp.manifest, inp.experiment.baseline)
        ev = integrity.SweepEvidence(root, inp.experiment, inp.runs, inp.curves, changes)
        stage, stage_cpu = [], []
        for _ in range(args.repeats):
            ev = integrity.SweepEvidence(root, inp.experiment, inp.runs, inp.curves, changes)   # no shared memo
            t, c = time.perf_counter(), time.process_time()
            integrity.check_sweep(ev)
            integrity.sweep_coverage(ev)
            stage.append(time.perf_counter() - t)
            stage_cpu.append(time.process_time() - c)
    w, wo, st = statistics.median(with_s), statistics.median(without_s), statistics.median(stage)
    added = statistics.median(a - b for a, b in zip(with_s, without_s))   # each repeat's pair: less load noise
    added_cpu = statistics.median(a - b for a, b in zip(with_cpu, without_cpu))
    st_cpu = statistics.median(stage_cpu)
    result = {"runs": n_runs, "curve_points": args.points, "curve_rows": int(len(inp.curves)),
              "resamples": args.resamples, "repeats": args.repeats, "report_with_s": w, "report_without_s": wo,
              "added_s": added, "ratio": w / wo, "with_each_s": with_s,
              "without_each_s": without_s, "stage_alone_s": st, "findings": found, "added_cpu_s": added_cpu,
              "with_cpu_each_s": with_cpu, "without_cpu_each_s": without_cpu, "stage_alone_cpu_s": st_cpu,
              "checks": [c.__name__ for c in integrity.CHECKS]}
    lines = ["# Checks across runs: cost on the report of a 1,000-run sweep", "",
             f"`python benchmarks/bench_integrity.py` ({n_runs} runs, {args.points} curve points each, "
             f"{len(inp.curves):,} curve rows, {args.resamples} bootstrap resamples, median of {args.repeats}, "
             f"report without plots; checks: {', '.join(result['checks'])})", "",
             f"- report with the integrity stage: {w:.2f} s; without: {wo:.2f} s (medians); added {added:+.2f} s "
             f"(median of the {args.repeats} paired differences; ratio {w / wo:.3f}; wall: noise on a loaded machine)",
             f"- CPU seconds of this process: added {added_cpu:+.2f} CPU-s (median of the paired differences; with "
             f"{statistics.median(with_cpu):.2f}, without {statistics.median(without_cpu):.2f}); target <= 1 s "
             f"added: {'OK' if added_cpu <= 1 else 'OVER TARGET'} (CPU)",
             f"- the stage alone (check_sweep + sweep_coverage on the loaded runs and curves): {st:.3f} s wall, "
             f"{st_cpu:.3f} CPU-s, {found} finding(s)"]
    print("\n".join(lines[2:]))
    if args.out:
        write_results(args.out, "bench_integrity", result, lines)


if __name__ == "__main__":
    main()
