"""How fast a run's reported metric lines are ingested (issue 48, scale): a zero-glue script printing N JSON lines.

    python benchmarks/bench_ingest.py                    # 1,000,000 lines, 3 interleaved repeats; writes results/
    python benchmarks/bench_ingest.py --lines 100000 --repeats 1 --no-write     # quicker

Measured side by side, in one process tree, so the machine's load touches every figure alike:
  script   `python task.py > log`: the script alone (wall, CPU)
  sweep    `python -m sweeper` of that one run (sweeper.reuse=false: each pair runs it; launcher=local,
           launcher.max_log_mb=null: with the default 16 MiB
           cap a million-line log is cut and its curve thinned by design): the run's wall under sweeper (its summary's
           wall_time_s: from the run command's start of the script, forked, to the end of the ingest of its output;
           status.json's `started` is rewritten by the run's finish, so started -> ended is the finish alone), the
           ratio to the script alone (target <= 1.2x) and the sweep command's wall
           script and sweep alternate, `--repeats` times (interleaved: a load change touches both); medians reported
  ingest   in this process, on the same output: the run command's whole ingest done after the script (the
           worst case: no line parsed while it ran): StdoutMetrics.feed, read_reported, Run.log_lines writing
           metrics.jsonl; lines per CPU-second (target >= 200,000 on one core)
  old      the same lines written one run.log call (one fsync) each, as before issue 48, on the first OLD_LINES
Every run is pinned by the pool to its slot; the load average is recorded with the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
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


def under_sweeper(proj: Path, name: str = "sw") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPER_PROGRESS": "plain"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=ingest", "seeds=0",
                        f"sweeper.dir={name}", "sweeper.report=false", "sweeper.reuse=false", "launcher=local",
                        "launcher.max_log_mb=null"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"sweep failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
    summary = json.loads((proj / name / "runs" / "a" / "seed_0" / "summary.json").read_text())
    metrics = proj / name / "runs" / "a" / "seed_0" / "metrics.jsonl"
    return {"run_wall_s": summary["wall_time_s"], "sweep_wall_s": wall,
            "metrics_lines": sum(1 for _ in open(metrics, "rb"))}


def ingest(proj: Path, lines: int) -> dict:
    """The run command's ingest on the script's output, in this process, all of it after the script's end:
    StdoutMetrics.feed + read_reported + Run.log_lines (what sweeper.run.command does with the output)."""
    from sweeper.run import init
    from sweeper.run.observed.reported import read_reported
    from sweeper.run.observed.stdout_metrics import StdoutMetrics

    data = (proj / "alone.log").read_bytes()
    work = Path(tempfile.mkdtemp(dir=proj))
    (work / "config.yaml").write_text("seed: 0\n")
    run = init(work, record_crashes=False)
    c0, t0 = time.process_time(), time.perf_counter()
    parsed = StdoutMetrics()
    parsed.feed(data)
    got = read_reported(parsed, ["stdout"], None, base=work / "out", out_dir=work / "out", metric="val_loss")
    run.log_lines(got.metrics_lines(("eval_fingerprint",)), got.steps[-1]["step"] if got.steps else None)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    written = sum(1 for _ in open(work / "metrics.jsonl", "rb"))
    old = Path(tempfile.mkdtemp(dir=proj))
    (old / "config.yaml").write_text("seed: 0\n")
    old_run = init(old, record_crashes=False)
    c1 = time.process_time()
    t1 = time.perf_counter()
    for record in got.steps[:OLD_LINES]:
        old_run.log(record["step"], **{k: v for k, v in record.items() if k != "step"})
    old_wall = time.perf_counter() - t1
    old_cpu = time.process_time() - c1
    return {"lines": lines, "written": written, "cpu_s": cpu, "wall_s": wall, "lines_per_cpu_s": lines / cpu,
            "lines_per_wall_s": lines / wall, "old_lines": OLD_LINES, "old_lines_per_wall_s": OLD_LINES / old_wall,
            "old_lines_per_cpu_s": OLD_LINES / max(old_cpu, 1e-9)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3, help="script alone / under sweeper pairs, interleaved")
    ap.add_argument("--no-write", action="store_true", help="print only, do not write benchmarks/results/")
    args = ap.parse_args()
    load = os.getloadavg()
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        proj = project(Path(tmp), args.lines)
        for i in range(args.repeats):
            one = script_alone(proj, args.lines)
            two = under_sweeper(proj, f"sw{i}")
            pairs.append({"script": one, "sweep": two, "ratio": two["run_wall_s"] / one["wall_s"]})
        eaten = ingest(proj, args.lines)
    med = statistics.median

    def middle(part: str, key: str) -> float:
        return med(p[part][key] for p in pairs)

    alone = {k: middle("script", k) for k in ("wall_s", "cpu_s")}
    swept = {k: middle("sweep", k) for k in ("run_wall_s", "sweep_wall_s", "metrics_lines")}
    out = {"lines": args.lines, "cpus": os.cpu_count(), "load_at_start": load, "load_at_end": os.getloadavg(),
           "repeats": pairs, "script": alone, "sweep": swept, "ingest": eaten,
           "run_over_script": med(p["ratio"] for p in pairs),
           "ratios": [round(p["ratio"], 3) for p in pairs]}
    md = (f"# bench_ingest: a zero-glue run printing {args.lines:,} JSON metric lines\n\n"
          f"`python benchmarks/bench_ingest.py --lines {args.lines} --repeats {args.repeats}`, {os.cpu_count()} CPUs "
          f"(shared), load average {load[0]:.1f} at start, {out['load_at_end'][0]:.1f} at end; medians of "
          f"{args.repeats} interleaved pairs (script alone, then under sweeper).\n\n"
          f"| figure | value |\n|---|---|\n"
          f"| script alone (wall / CPU) | {alone['wall_s']:.2f} s / {alone['cpu_s']:.2f} s |\n"
          f"| the run under sweeper (summary wall_time_s: script + ingest) | {swept['run_wall_s']:.2f} s: "
          f"**{out['run_over_script']:.2f}x** the script alone (each pair: "
          f"{', '.join(f'{r:.2f}' for r in out['ratios'])}) |\n"
          f"| the sweep command (plan, launch, run, end), wall | {swept['sweep_wall_s']:.2f} s |\n"
          f"| ingest all after the script (feed + read_reported + Run.log_lines), per CPU-second | "
          f"**{eaten['lines_per_cpu_s']:,.0f} lines/s** "
          f"({eaten['cpu_s']:.2f} s CPU, {eaten['lines_per_wall_s']:,.0f} lines/s wall, {eaten['written']:,} "
          f"lines written) |\n"
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
