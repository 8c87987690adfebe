"""How fast a run's reported metric lines are ingested (issue 48, scale): a zero-glue script printing N JSON lines.

    python benchmarks/bench_ingest.py                    # 1,000,000 lines; writes benchmarks/results/bench_ingest.*
    python benchmarks/bench_ingest.py --lines 100000     # quicker

Measured side by side, in one process tree, so the machine's load touches every figure alike:
  script   `python task.py > log`: the script alone (wall, CPU)
  sweep    `python -m sweeper` of that one run (launcher=local, launcher.max_log_mb=null: with the default 16 MiB
           cap a million-line log is cut and its curve thinned by design): the run's wall under sweeper (its status.json
           started -> ended), the ratio to the script alone (target <= 1.2x) and the sweep command's wall
  ingest   in this process, on the same output: the run command's end (sweeper.run.observed.reported.read_reported, then
           Run.log_many writing metrics.jsonl), lines per CPU-second (target >= 200,000 on one core)
  old      the same lines written one run.log call (one fsync) each, as before issue 48, on the first OLD_LINES
Every run is pinned by the pool to its slot; `uptime` is printed with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
OLD_LINES = 5_000

TASK = """import json, os, sys
n = int(sys.argv[1])
w = sys.stdout.write
for i in range(n):
    w('{"step": %d, "train_loss": %.6f, "lr": 0.001}\\n' % (i, 1.0 / (i + 1)))
print(json.dumps({"val_loss": 0.5}))
"""
EXPERIMENT = """# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, task.py, "{lines}"]
experiment:
  name: ingest
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants:
    a: []
"""


def project(root: Path, lines: int) -> Path:
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    (root / "conf" / "experiment" / "ingest.yaml").write_text(EXPERIMENT.replace("{lines}", str(lines)))
    (root / "task.py").write_text(TASK)
    return root


def script_alone(proj: Path, lines: int) -> dict:
    before = os.times()
    t0 = time.perf_counter()
    with open(proj / "alone.log", "wb") as out:
        subprocess.run([sys.executable, "task.py", str(lines)], cwd=proj, stdout=out, check=True)
    wall = time.perf_counter() - t0
    after = os.times()
    return {"wall_s": wall, "cpu_s": after.children_user - before.children_user
            + after.children_system - before.children_system}


def under_sweeper(proj: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPER_PROGRESS": "plain"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=ingest", "seeds=0",
                        "sweeper.dir=sw", "sweeper.report=false", "launcher=local",
                        "launcher.max_log_mb=null"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"sweep failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
    status = json.loads((proj / "sw" / "runs" / "a" / "seed_0" / "status.json").read_text())
    metrics = proj / "sw" / "runs" / "a" / "seed_0" / "metrics.jsonl"
    return {"run_wall_s": status["ended"] - status["started"], "sweep_wall_s": wall,
            "metrics_lines": sum(1 for _ in open(metrics))}


def ingest(proj: Path, lines: int) -> dict:
    """The run command's end on the script's output, in this process: read_reported + Run.log_many."""
    from sweeper.run import init
    from sweeper.run.observed.reported import read_reported

    text = (proj / "alone.log").read_text()
    work = Path(tempfile.mkdtemp(dir=proj))
    (work / "config.yaml").write_text("seed: 0\n")
    run = init(work, record_crashes=False)
    c0, t0 = time.process_time(), time.perf_counter()
    got = read_reported(text, ["stdout"], None, base=work / "out", out_dir=work / "out", metric="val_loss")
    run.log_many(got.steps)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    old = Path(tempfile.mkdtemp(dir=proj))
    (old / "config.yaml").write_text("seed: 0\n")
    old_run = init(old, record_crashes=False)
    c1 = time.process_time()
    t1 = time.perf_counter()
    for record in got.steps[:OLD_LINES]:
        old_run.log(record["step"], **{k: v for k, v in record.items() if k != "step"})
    old_wall = time.perf_counter() - t1
    old_cpu = time.process_time() - c1
    return {"lines": lines, "cpu_s": cpu, "wall_s": wall, "lines_per_cpu_s": lines / cpu,
            "lines_per_wall_s": lines / wall, "old_lines": OLD_LINES, "old_lines_per_wall_s": OLD_LINES / old_wall,
            "old_lines_per_cpu_s": OLD_LINES / max(old_cpu, 1e-9)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--no-write", action="store_true", help="print only, do not write benchmarks/results/")
    args = ap.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        proj = project(Path(tmp), args.lines)
        alone = script_alone(proj, args.lines)
        swept = under_sweeper(proj)
        eaten = ingest(proj, args.lines)
    out = {"lines": args.lines, "load_at_start": load, "load_at_end": os.getloadavg(), "script": alone,
           "sweep": swept, "ingest": eaten, "run_over_script": swept["run_wall_s"] / alone["wall_s"]}
    md = (f"# bench_ingest: a zero-glue run printing {args.lines:,} JSON metric lines\n\n"
          f"`python benchmarks/bench_ingest.py --lines {args.lines}`, {os.cpu_count()} CPUs, load average "
          f"{load[0]:.1f} at start, {out['load_at_end'][0]:.1f} at end.\n\n"
          f"| figure | value |\n|---|---|\n"
          f"| script alone (wall / CPU) | {alone['wall_s']:.2f} s / {alone['cpu_s']:.2f} s |\n"
          f"| the run under sweeper (status started -> ended) | {swept['run_wall_s']:.2f} s: "
          f"**{out['run_over_script']:.2f}x** the script alone |\n"
          f"| the sweep command (plan, launch, run, end) | {swept['sweep_wall_s']:.2f} s |\n"
          f"| ingest (read_reported + Run.log_many), per CPU-second | **{eaten['lines_per_cpu_s']:,.0f} lines/s** "
          f"({eaten['cpu_s']:.2f} s CPU, {eaten['lines_per_wall_s']:,.0f} lines/s wall) |\n"
          f"| before: run.log per line (an fsync each), first {OLD_LINES:,} lines | "
          f"{eaten['old_lines_per_wall_s']:,.0f} lines/s wall |\n"
          f"| metrics.jsonl lines written by the sweep | {swept['metrics_lines']:,} |\n")
    print(md)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bench_ingest.json").write_text(json.dumps(out, indent=2) + "\n")
        (RESULTS / "bench_ingest.md").write_text(md)


if __name__ == "__main__":
    main()
