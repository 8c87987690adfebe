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
  ctrl_c   (--ctrl-c N) `python -m sweeper` of N runs, SIGINT 0.5 s after it starts writing the sweep dir: seconds
           to exit 130, and the CPU time (user + system) the command used before the first run starts (the
           same command uninterrupted, stopped at its first `start` line)
  typo     (--typo) 200 variants, a key typo in the last: seconds and CPU to the one-line refusal
  issue48  (--issue48) 200 variants x 3 seeds `sweeper.dry_run=true` (CPU s; Hydra composes once, each variant's
           value overrides applied to a copy), and `sweeper.report DIR --no-plots` on 10,000 finished runs written
           through the run contract's writers (CPU s): results/bench_scale_issue48.{json,md}
Targets (issue 16): per-run overhead <= 50 ms at 1,000 runs; the report of 10,000 runs <= 10 s. Issue 40: Ctrl-C
answered within 1.5 s at any moment of a 10,000-run plan; a typo in the 200th variant named within 2 s (idle).
Issue 48: 200 variants plan and dry-run in <= 5 s; a 10,000-run sweep reports in <= 10 s.
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
    from sweeper.run.files.records import Summary
    from sweeper.run.files.status_values import Status

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


def _sweeper_cmd(proj: Path, args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SWEEPER_PROGRESS": "plain"}
    return subprocess.Popen([sys.executable, "-m", "sweeper", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=proj)


def _child_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (its own, /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ctrl_c(proj: Path, n: int, work: Path) -> dict:
    """SIGINT 0.5 s into writing the sweep dir of n runs: seconds to the exit; and the CPU the same command uses
    before its first run starts."""
    import signal
    args = argv_for(proj, n, work / f"ctrl-c-{n}")
    p = _sweeper_cmd(proj, args)
    for line in p.stdout:
        if "sweep dir " in line:
            break
    time.sleep(0.5)
    t0 = time.perf_counter()
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=600)[0]
    answered = time.perf_counter() - t0
    runs_dir = work / f"ctrl-c-{n}" / "runs"
    written = sum(1 for _ in runs_dir.glob("*/seed_*")) if runs_dir.exists() else 0
    q = _sweeper_cmd(proj, argv_for(proj, n, work / f"first-{n}") + ["launcher.max_parallel=1"])
    t1 = time.perf_counter()
    for line in q.stdout:
        if "] start  " in line:
            break
    cpu, wall = _child_cpu(q.pid), time.perf_counter() - t1
    q.send_signal(signal.SIGINT)
    q.communicate(timeout=600)
    return {"runs": n, "exit": p.returncode, "answered_s": answered, "run_dirs_written_before_exit": written,
            "interrupted_line": next((x for x in out.splitlines() if "interrupted" in x), ""),
            "cpu_to_first_start_s": cpu, "wall_to_first_start_s": wall}


def typo(work: Path, n: int = 200) -> dict:
    """n variants, a key typo in the last one: wall and CPU to the refusal."""
    root = work / "typo"
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    lines = ["# @package _global_", "defaults:", "  - override /task: custom", "task:", "  command: [python, t.py]",
             "width: 0", "experiment:", "  name: many", "  baseline: v0", "  metric: val_loss",
             "  lower_is_better: true", "  variants:"]
    lines += [f"    v{i}: [width={i}]" for i in range(n - 1)] + [f"    v{n - 1}: [widht={n - 1}]"]
    (root / "conf" / "experiment" / "many.yaml").write_text("\n".join(lines) + "\n")
    (root / "t.py").write_text("print('{\"val_loss\": 1}')\n")
    before = os.times()
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=many", "seeds=0"],
                       capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = os.times()
    return {"variants": n, "exit": r.returncode, "wall_s": wall,
            "cpu_s": (after.children_user - before.children_user) + (after.children_system - before.children_system),
            "line": r.stderr.strip()}


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
    ap.add_argument("--ctrl-c", type=int, default=None, help="runs of the Ctrl-C trial (default 10000; 0: none)")
    ap.add_argument("--typo", action="store_true", help="only the Ctrl-C and 200-variant typo figures (issue 40)")
    ap.add_argument("--issue48", action="store_true", help="only the 200-variant dry run and the big report (issue 48)")
    ap.add_argument("--report-runs", type=int, default=10000, help="runs of the --issue48 report (0: none)")
    args = ap.parse_args()
    if args.issue48:
        return issue48(args)
    if args.typo:
        return issue40(args)
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


def issue40(args) -> int:
    """The Ctrl-C trial at 10,000 runs and the 200-variant typo; results/bench_scale_issue40.{json,md}."""
    n = args.ctrl_c if args.ctrl_c is not None else 10000
    out = {"machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        work = Path(tmp)
        out["typo"] = typo(work)
        print(json.dumps(out["typo"]), flush=True)
        if n:
            out["ctrl_c"] = ctrl_c(project(work / "project"), n, work)
            print(json.dumps(out["ctrl_c"]), flush=True)
    out["machine"]["load_avg_end"] = os.getloadavg()
    lines = ["# bench_scale (issue 40): Ctrl-C in a big plan, a typo in the 200th variant", "",
             f"`python benchmarks/bench_scale.py --typo` on {out['machine']['cpus']} CPUs, load average "
             f"{', '.join(f'{x:.1f}' for x in out['machine']['load_avg'])} at start, "
             f"{', '.join(f'{x:.1f}' for x in out['machine']['load_avg_end'])} at the end (CPU seconds are what an "
             f"idle machine's wall time comes close to).", "",
             f"- 200 variants, typo in the last: exit {out['typo']['exit']}, {out['typo']['wall_s']:.2f} s wall, "
             f"**{out['typo']['cpu_s']:.2f} s CPU** (target: within 2 s idle; before: one compose per variant, "
             f"36 s idle): `{out['typo']['line']}`"]
    if "ctrl_c" in out:
        c = out["ctrl_c"]
        lines += [f"- {c['runs']:,} runs, SIGINT 0.5 s into writing the sweep dir: exit {c['exit']} "
                  f"**{c['answered_s']:.2f} s** after the signal, {c['run_dirs_written_before_exit']:,} run dirs "
                  f"written by then (target 1.5 s; before: 35.8 s, every run dir written first)",
                  f"- the same command to its first run's start: **{c['cpu_to_first_start_s']:.1f} s CPU**, "
                  f"{c['wall_to_first_start_s']:.1f} s wall (before: about 28 s CPU)"]
    if not args.no_write:
        (RESULTS / "bench_scale_issue40.json").write_text(json.dumps(out, indent=2) + "\n")
        (RESULTS / "bench_scale_issue40.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _child_run(cmd: list[str], cwd: Path) -> dict:
    """Wall and CPU (user + system of the child) of one command."""
    before, t0 = os.times(), time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall, after = time.perf_counter() - t0, os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"exit": r.returncode, "wall_s": wall, "cpu_s": cpu, "tail": (r.stdout + r.stderr)[-300:]}


def many_variants(work: Path, n: int = 200) -> dict:
    """n variants (one value override each) x 3 seeds, dry run: wall and CPU of the whole command."""
    root = work / "many"
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    lines = ["# @package _global_", "defaults:", "  - override /task: custom", "task:", "  command: [python, t.py]",
             "width: 0", "experiment:", "  name: many", "  baseline: v0", "  metric: val_loss",
             "  lower_is_better: true", "  variants:"] + [f"    v{i}: [width={i}]" for i in range(n)]
    (root / "conf" / "experiment" / "many.yaml").write_text("\n".join(lines) + "\n")
    (root / "t.py").write_text("print('{\"val_loss\": 1}')\n")
    out = _child_run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=many", "seeds=0-2",
                      "sweeper.dry_run=true", f"sweeper.dir={root / 'sweep'}"], root)
    return {"variants": n, "seeds": 3, **out}


def big_report(work: Path, n: int = 10000, arms: int = 4) -> dict:
    """A sweep dir of n finished runs (status, summary, manifest; tests/test_scale_stats.finished_sweep, the run
    contract's writers), then `python -m sweeper.report DIR --no-plots`: wall and CPU."""
    import numpy as np

    from tests.test_scale_stats import finished_sweep
    rng = np.random.default_rng(0)
    sweep = work / f"report-{n}"
    finished_sweep(sweep, {chr(97 + i): list(rng.normal(1.0 + 0.01 * i, 0.1, n // arms)) for i in range(arms)})
    out = _child_run([sys.executable, "-m", "sweeper.report", str(sweep), "--no-plots"], work)
    return {"runs": n, "arms": arms, **out}


def issue48(args) -> int:
    out = {"machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        work = Path(tmp)
        out["variants"] = many_variants(work)
        print(json.dumps(out["variants"]), flush=True)
        if args.report_runs:
            out["report"] = big_report(work, args.report_runs)
            print(json.dumps(out["report"]), flush=True)
    out["machine"]["load_avg_end"] = os.getloadavg()
    v = out["variants"]
    lines = ["# bench_scale (issue 48): 200 variants dry-run, the report of 10,000 runs", "",
             f"`python benchmarks/bench_scale.py --issue48` on {out['machine']['cpus']} CPUs, load average "
             f"{', '.join(f'{x:.1f}' for x in out['machine']['load_avg'])} at start, "
             f"{', '.join(f'{x:.1f}' for x in out['machine']['load_avg_end'])} at the end (the CPU seconds are the "
             f"figure to read on a loaded machine).", "",
             f"- {v['variants']} variants x {v['seeds']} seeds, `sweeper.dry_run=true`: exit {v['exit']}, "
             f"{v['wall_s']:.1f} s wall, **{v['cpu_s']:.1f} s CPU** (target 5 s; before: one Hydra composition per "
             f"variant and two more per variant for the ablation check, 34 s CPU at load 14)"]
    if "report" in out:
        r = out["report"]
        lines.append(f"- `sweeper.report DIR --no-plots`, {r['runs']:,} finished runs in {r['arms']} arms: exit "
                     f"{r['exit']}, {r['wall_s']:.1f} s wall, **{r['cpu_s']:.1f} s CPU** (target 10 s)")
    if not args.no_write:
        (RESULTS / "bench_scale_issue48.json").write_text(json.dumps(out, indent=2) + "\n")
        (RESULTS / "bench_scale_issue48.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
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
