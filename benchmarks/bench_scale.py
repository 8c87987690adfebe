"""How the sweeper's own cost grows with the work: plan, launch, sweep dir, report, live view (issue 16 item 3).

    python benchmarks/bench_scale.py                       # 1,000 and 10,000 runs; writes benchmarks/results/
    python benchmarks/bench_scale.py --quick               # 100 and 1,000 runs (a minute)
    python benchmarks/bench_scale.py --profile plan        # cProfile of one stage (plan|write|report|live)

Every run is a tiny user task (a script that calls sweeper.init and finishes at once). Stages:
  plan     compose + plan N runs (sweeper.cli.sweep.prepare), in this process
  write    write the sweep dir (each run's config and status, the manifest): sweeper.plan.make.write_plan
  launch   `python -m sweeper ... launcher=local` for N_LAUNCH runs, against the same N_LAUNCH processes of the
           same task started by a bare pool with the same slots (xargs -P, each with its run's environment):
           per-run overhead = (sweeper wall - bare wall) x slots / N: the sweeper's cost beyond the run's own work
  size     the sweep dir's bytes and files for N runs, finished (status, summary, 20 metrics lines each)
  report   python -m sweeper.report SWEEP_DIR --no-plots on the N finished runs (a subprocess, as a user runs it)
  live     the live view (Progress, live=True) with R runs running: ms per redraw and per event, lines drawn
Targets (issue 16): per-run overhead <= 50 ms at 1,000 runs; the report of 10,000 runs <= 10 s.
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"

TASK = """import sweeper
run = sweeper.init()
run.finish(val_loss=0.01 * run.config["seed"] + run.config["shift"])
"""
VARIANTS = {"a": [], "b": ["shift=0.5"], "c": ["shift=1.0"], "d": ["shift=1.5"]}


def project(root: Path) -> Path:
    """A user project: conf/experiment/scale.yaml (4 variants, task.command: [python, task.py]) and task.py."""
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    lines = ["# @package _global_", "defaults:", "  - override /task: custom", "task:", "  command: [python, task.py]",
             "shift: 0.0", "experiment:", "  name: scale", "  baseline: a", "  metric: val_loss",
             "  lower_is_better: true", "  variants:"]
    lines += [f"    {name}: [{', '.join(ovs)}]" for name, ovs in VARIANTS.items()]
    (root / "conf" / "experiment" / "scale.yaml").write_text("\n".join(lines) + "\n")
    (root / "task.py").write_text(TASK)
    return root


def argv_for(proj: Path, n: int, sweep_dir: Path) -> list[str]:
    seeds = n // len(VARIANTS)
    return ["--config-dir", str(proj / "conf"), "+experiment=scale", f"seeds=0-{seeds - 1}",
            f"sweeper.dir={sweep_dir}", "sweeper.report=false", f"sweeper.max_runs={max(n, 1000)}", f"task.cwd={proj}"]


def timed(fn, profile: bool = False):
    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    out = fn()
    if prof:
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        print(s.getvalue())
    return out, time.perf_counter() - t0


def plan_and_write(proj: Path, n: int, sweep_dir: Path, profile: str | None) -> dict:
    from sweeper.cli.sweep import prepare
    from sweeper.plan.make import write_plan

    argv = argv_for(proj, n, sweep_dir)
    (plan, _backend, _cfg), plan_s = timed(lambda: prepare(argv), profile == "plan")
    _, write_s = timed(lambda: write_plan(plan, argv), profile == "write")
    return {"runs": len(plan.runs), "plan_s": plan_s, "write_s": write_s, "plan": plan}


@contextlib.contextmanager
def no_fsync():
    """The benchmark's own fixture only: its files need no durability (10,000 runs x 23 fsyncs is minutes)."""
    real, os.fsync = os.fsync, lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


def finish_runs(plan) -> float:
    """Every run finished as the task would leave it (status, 20 metrics lines, summary), through RunDir
    (without fsync: this is the fixture, not a measured stage)."""
    from sweeper.run.files.rundir import Status, Summary

    with no_fsync():
        return _finish_runs(plan, Status, Summary)


def _finish_runs(plan, Status, Summary) -> float:
    t0 = time.perf_counter()
    for i, run in enumerate(plan.runs):
        rd = run.rundir
        for step in range(1, 21):
            rd.append_metrics({"step": step, "train_loss": 1.0 / step, "lr": 0.001})
        val = 0.01 * run.seed + {"a": 0.0, "b": 0.5, "c": 1.0, "d": 1.5}[run.variant] + 1e-4 * (i % 7)
        rd.write_summary(Summary(status=Status.FINISHED, final={"val_loss": val}, steps=20, wall_time_s=0.1,
                                 run_id=run.run_id, experiment=plan.experiment.name, variant=run.variant,
                                 seed=run.seed, config_hash=run.config_hash))
        rd.update_status(Status.FINISHED, started=time.time() - 0.1, ended=time.time(), exit_code=0, attempts=1)
    return time.perf_counter() - t0


def dir_size(path: Path) -> tuple[int, int]:
    total = files = 0
    for p in path.rglob("*"):
        if p.is_file():
            files += 1
            total += p.stat().st_size
    return total, files


def report_time(sweep_dir: Path, profile: bool) -> tuple[float, int]:
    cmd = [sys.executable, *(["-m", "cProfile", "-s", "cumulative"] if profile else []), "-m", "sweeper.report",
           str(sweep_dir), "--no-plots"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - t0
    if profile:
        lines = r.stdout.splitlines()                 # the report's text, then cProfile's table (top first)
        top = next((i for i, line in enumerate(lines) if "Ordered by" in line), 0)
        print("\n".join(lines[top:top + 70]))
    if r.returncode not in (0, 1):
        raise SystemExit(f"report failed ({r.returncode}): {r.stderr[-2000:]}")
    return wall, r.returncode


def launch(proj: Path, n: int, work: Path) -> dict:
    """The sweeper's local pool against a bare pool of the same processes and slots."""
    from sweeper.cli.sweep import prepare
    from sweeper.plan.make import write_plan

    sweep_dir = work / f"launch-{n}"
    argv = argv_for(proj, n, sweep_dir) + ["launcher=local"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPER_PROGRESS": "plain"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sweeper", *argv], capture_output=True, text=True, env=env,
                       timeout=3600, cwd=proj)
    sweeper_s = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"sweeper failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
    slots = len({line.split(" on ", 1)[1].split()[0] for line in r.stdout.splitlines()
                 if "] start  " in line and " on " in line}) or len(os.sched_getaffinity(0))
    # the bare pool: the same task, each process with its own run's environment, in a second sweep dir
    bare_dir = work / f"bare-{n}"
    plan, _, _ = prepare(argv_for(proj, n, bare_dir) + ["launcher=local"])
    write_plan(plan, argv_for(proj, n, bare_dir))
    lines = []
    for run in plan.runs:
        run_env = {**plan.run_env(run), "PYTHONPATH": f"{proj}:{ROOT}", "OMP_NUM_THREADS": "1"}
        lines.append(" ".join(["env", *(f"{k}={shlex.quote(str(v))}" for k, v in run_env.items()),
                               *map(shlex.quote, plan.argv(run))]))
    script = work / f"bare-{n}.txt"
    script.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    b = subprocess.run(f"xargs -P {slots} -I CMD sh -c CMD < {shlex.quote(str(script))}", shell=True, cwd=proj,
                       capture_output=True, text=True, timeout=3600)
    bare_s = time.perf_counter() - t0
    if b.returncode != 0:
        raise SystemExit(f"bare pool failed: {b.stderr[-2000:]}")
    return {"runs": n, "slots": slots, "sweeper_s": sweeper_s, "bare_s": bare_s,
            "overhead_ms_per_run": (sweeper_s - bare_s) * slots / n * 1000}


class _Run:
    def __init__(self, rd, i):
        self.run_dir, self.label, self.total_steps = rd.path, f"v/seed_{i}", 20


class _Slot:
    def __init__(self, i):
        self.name, self.cores, self.threads = f"cpu{i}", (), 1


def live_view(plan, running: int, profile: bool) -> dict:
    """Progress, live, with `running` runs running: ms per redraw (tick) and per event line (log)."""
    from sweeper.backends.progress import Progress

    runs = [(_Run(r.rundir, i), _Slot(i)) for i, r in enumerate(plan.runs[:running])]
    out = io.StringIO()
    progress = Progress(total=len(plan.runs), stream=out, live=True)
    progress.tick(runs, force=True)
    ticks = 20

    def redraw():
        for _ in range(ticks):
            progress.tick(runs, force=True)
    _, tick_s = timed(redraw, profile)
    events = 200
    size0 = out.tell()

    def log():
        for i in range(events):
            progress.log(f"done   v/seed_{i} in 0.1s val_loss=0.1")
    _, log_s = timed(log)
    return {"running": running, "ms_per_redraw": tick_s / ticks * 1000, "ms_per_event": log_s / events * 1000,
            "bytes_per_event": (out.tell() - size0) / events, "lines_in_view": progress._block_lines}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", choices=["plan", "write", "report", "live"])
    ap.add_argument("--sizes", default=None, help="comma list of run counts (default 1000,10000)")
    ap.add_argument("--launch", type=int, default=None, help="runs actually launched (default 1000)")
    ap.add_argument("--no-write", action="store_true", help="do not write benchmarks/results")
    args = ap.parse_args()
    sizes = [int(s) for s in (args.sizes or ("100,1000" if args.quick else "1000,10000")).split(",")]
    n_launch = args.launch if args.launch is not None else (100 if args.quick else 1000)
    out = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                       "load_avg": os.getloadavg()}, "sizes": [], "launch": None, "live": []}
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        work = Path(tmp)
        proj = project(work / "project")
        for n in sizes:
            row = plan_and_write(proj, n, work / f"sweep-{n}", args.profile)
            plan = row.pop("plan")
            row["finish_s"] = finish_runs(plan)
            row["dir_bytes"], row["dir_files"] = dir_size(plan.sweep_dir)
            row["report_s"], row["report_rc"] = report_time(plan.sweep_dir, args.profile == "report")
            out["sizes"].append(row)
            print(json.dumps(row), flush=True)
            if n == max(sizes):
                for running in (10, 100, 500):
                    out["live"].append(live_view(plan, min(running, len(plan.runs)), args.profile == "live"))
                    print(json.dumps(out["live"][-1]), flush=True)
        if n_launch:
            out["launch"] = launch(proj, n_launch, work)
            print(json.dumps(out["launch"]), flush=True)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "bench_scale.json").write_text(json.dumps(out, indent=2) + "\n")
        (RESULTS / "bench_scale.md").write_text(markdown(out))
    print(markdown(out))
    return 0


def markdown(out: dict) -> str:
    lines = ["# bench_scale: the sweeper's cost as the work grows", "",
             f"`python benchmarks/bench_scale.py` on {out['machine']['cpus']} CPUs, Python {out['machine']['python']}, "
             f"load average at start {', '.join(f'{x:.1f}' for x in out['machine']['load_avg'])}. Tiny user task "
             f"(sweeper.init + finish); 4 variants.", "",
             "| runs | plan (compose+plan) | write sweep dir | sweep dir (finished) | report --no-plots |",
             "|---|---|---|---|---|"]
    for r in out["sizes"]:
        lines.append(f"| {r['runs']:,} | {r['plan_s']:.2f} s | {r['write_s']:.2f} s | "
                     f"{r['dir_bytes'] / 2**20:.1f} MiB, {r['dir_files']:,} files | {r['report_s']:.2f} s |")
    if out["launch"]:
        la = out["launch"]
        lines += [
            "",
            f"Launch, {la['runs']:,} runs on {la['slots']} slots: sweeper {la['sweeper_s']:.1f} s, bare "
            f"pool of the same processes {la['bare_s']:.1f} s: **{la['overhead_ms_per_run']:.1f} ms per run** "
            f"beyond the run's own work (target <= 50 ms).",
        ]
    if out["live"]:
        lines += [
            "",
            "| live view: runs running | ms per redraw | ms per event line | bytes per event | lines shown |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {v['running']} | {v['ms_per_redraw']:.2f} | {v['ms_per_event']:.2f} | "
            f"{v['bytes_per_event']:.0f} | {v['lines_in_view']} |"
            for v in out["live"]
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
