"""The first command a newcomer runs, today's default against the new one, side by side in one run.

    python benchmarks/bench_first_run.py                 # both sweeps, one after the other; results/bench_first_run.*
    python benchmarks/bench_first_run.py --old train.steps=300 --new ''   # what each sweep adds to the command

Each sweep is `python -m sweeper +experiment=rope seeds=0-3` in a fresh sweep dir: "old" with the settings the
default had before (300 steps per run), "new" with the shipped default. Reported: the wall time of each (the
whole command: plan, preflight, 12 runs on the local pool, report) and its CPU time (every process, children
included: what a machine busy with other work changes least), their ratios, the training time per step (the
runs' own wall_time_s / steps), and the decisions (nope worse, rope_frozen_qk invalid) each sweep reached, with
nope's difference and its decision interval, so the cheaper default is seen to decide the same.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sweep(extra: list[str], sweep_dir: Path) -> dict:
    env = {**os.environ, "SWEEPER_PROGRESS": "plain", "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "sweeper", "+experiment=rope", "seeds=0-3", f"sweeper.dir={sweep_dir}",
            "sweeper.journal=off", *extra]
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=sweep_dir.parent)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}): {' '.join(argv)}\n"
                         f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    from sweeper.analysis.results import load_experiment, load_manifest, load_runs
    from sweeper.analysis.verdict import analyze_all
    from sweeper.config.decision import DecisionOptions

    manifest = load_manifest(sweep_dir)
    runs = load_runs(sweep_dir, manifest)
    exp, _ = load_experiment(sweep_dir, manifest)
    primary, _ = analyze_all(runs, exp, DecisionOptions(n_resamples=2000))
    decisions = {}
    for c in primary.comparisons:
        ci = c.decision_ci
        decisions[c.variant] = {"verdict": c.verdict, "numbers_say": c.numbers_say or c.verdict,
                                "delta": c.delta.estimate if c.delta else None,
                                "ci": [ci.low, ci.high] if ci else None, "design": c.design}
    steps = runs["steps"].astype(float)
    per_step = float((runs["wall_time_s"] / steps).mean())
    (sweep_dir.parent / f"{sweep_dir.name}.stdout.txt").write_text(proc.stdout)
    return {"argv": " ".join(shlex.quote(a) for a in argv[1:]), "wall_s": wall, "cpu_s": cpu, "runs": len(runs),
            "steps_per_run": float(steps.mean()), "run_wall_s_mean": float(runs["wall_time_s"].mean()),
            "s_per_step": per_step, "decisions": decisions}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", default="train.steps=300 train.eval_interval=50 model.context=64",
                   help="overrides that give today's (the previous) default")
    p.add_argument("--new", default="", help="overrides of the new default (empty: as shipped)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = sweep(shlex.split(args.old), Path(tmp) / "old")
        new = sweep(shlex.split(args.new), Path(tmp) / "new")
        for name in ("old", "new"):                   # what each printed: the decision table, kept beside results
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / f"bench_first_run_{name}.txt").write_text((Path(tmp) / f"{name}.stdout.txt").read_text())
    ratio = new["wall_s"] / old["wall_s"]
    result = {"old": old, "new": new, "ratio": ratio, "cpu_ratio": new["cpu_s"] / old["cpu_s"],
              "cores": len(os.sched_getaffinity(0)), "load_avg_1m": os.getloadavg()[0]}
    print(json.dumps(result, indent=1))
    from benchmarks._results import write_results

    def line(name, r):
        d = r["decisions"]
        return (f"| {name} | `{r['argv']}` | {r['wall_s']:.0f} s | {r['cpu_s']:.0f} s | {r['steps_per_run']:.0f} | "
                f"{r['s_per_step']:.3f} s | "
                f"nope {d['nope']['verdict']} {d['nope']['delta']:+.3f} [{d['nope']['ci'][0]:+.3f}, "
                f"{d['nope']['ci'][1]:+.3f}]; rope_frozen_qk {d['rope_frozen_qk']['verdict']} |")
    write_results(args.out, "bench_first_run", result, [
        "# The first run: today's default vs the new one (side by side, one run)", "",
        f"{result['cores']} cores, load average {result['load_avg_1m']:.2f} at the end; "
        f"`python benchmarks/bench_first_run.py`", "",
        "| sweep | command | wall | CPU (all processes) | steps/run | s per step (run's own) | decisions |",
        "|---|---|---|---|---|---|---|",
        line("old default", old), line("new default", new), "",
        f"new / old wall time: {ratio:.2f}; CPU time: {result['cpu_ratio']:.2f} (the CPU time of the whole sweep, "
        f"children included, is what a busy machine changes least)"])


if __name__ == "__main__":
    main()
