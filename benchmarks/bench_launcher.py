"""`python benchmarks/bench_launcher.py [--runs 2] [--steps 150]`: the local pool against hand-written launches.

The same runs (the rope experiment's baseline config, seeds 0..runs-1, `--steps` steps) on this machine, four ways,
one after another, each in fresh run dirs:
  (a) sweeper's local pool (sweeper.backends.local.backend.launch: slots, affinity, thread counts, polling, run
  statuses)
  (b) the hand-written shell loop: `CUDA_VISIBLE_DEVICES=$i OMP_NUM_THREADS=<cores/runs> python -m sweeper.run
      sweeper.train:main RUN_DIR &` per run (the task the pool starts), then `wait`
  (c) the same parallel launch with no thread limits (every run takes every core)
  (d) one run after another, default threads
Prints wall times and the ratios a/b (target <= 1.05), c/a (target >= 2.5) and d/a, and checks that every run
finished (and that (a) and (b), which use the same thread count, end with the same validation loss).
Takes about 3 minutes on 2 cores with the defaults. Not a test: numbers depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")

SHELL_LOOP = """
i=0
for d in "$@"; do
  CUDA_VISIBLE_DEVICES=$i OMP_NUM_THREADS=$THREADS python -m sweeper.run $ENTRY "$d" > "$d/$LOG" 2>&1 &
  i=$((i+1))
done
wait
"""
UNLIMITED_LOOP = """
i=0
for d in "$@"; do
  CUDA_VISIBLE_DEVICES=$i python -m sweeper.run $ENTRY "$d" > "$d/$LOG" 2>&1 &
  i=$((i+1))
done
wait
"""
SEQUENTIAL = """
for d in "$@"; do python -m sweeper.run $ENTRY "$d" > "$d/$LOG" 2>&1; done
"""


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def make_plan(sweep_dir: Path, runs: int, steps: int):
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan as plan_of
    from sweeper.plan.make import write_plan

    variants = ["~experiment.variants.nope", "~experiment.variants.rope_frozen_qk"]
    args = ["+experiment=rope", *variants, f"train.steps={steps}", f"sweeper.dir={sweep_dir}"]
    plan = plan_of(compose_sweep(args), list(range(runs)))
    write_plan(plan, args)
    return plan


def copy_runs(plan, dest: Path) -> list[Path]:
    """Fresh run dirs holding only the frozen config of each planned run."""
    from sweeper.run.files.rundir import RunDir

    dirs = []
    for run in plan.runs:
        rd = RunDir(dest / run.variant / f"seed_{run.seed}")
        rd.path.mkdir(parents=True)
        shutil.copy(run.rundir.config_path, rd.config_path)
        dirs.append(rd.path)
    return dirs


def shell(script: str, dirs: list[Path], entry: str, threads: int | None = None) -> float:
    from sweeper.run.files.rundir import LOG

    env = clean_env()
    env.update(ENTRY=entry, LOG=LOG)
    if threads is not None:
        env["THREADS"] = str(threads)
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", script, "loop", *map(str, dirs)], cwd=ROOT, env=env, check=True)
    return time.perf_counter() - t0


def pool(plan) -> float:
    from sweeper.backends.local.backend import launch
    from sweeper.backends.local.schema import LocalLauncherConf
    from sweeper.backends.progress import Progress

    saved = {k: os.environ.pop(k) for k in THREAD_VARS if k in os.environ}
    try:
        t0 = time.perf_counter()
        launch(plan, LocalLauncherConf(), Progress(total=len(plan.runs), stream=open(os.devnull, "w"), live=False))
        return time.perf_counter() - t0
    finally:
        os.environ.update(saved)


def outcome(run_dir: Path) -> tuple[str, float | None]:
    from sweeper.run.files.rundir import RunDir

    summary = RunDir(run_dir).read_summary()
    return (summary.status.value, summary.final.get("val_loss")) if summary is not None else ("missing", None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--keep", action="store_true", help="keep the run dirs (printed)")
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    threads = max(1, cores // a.runs)
    work = Path(tempfile.mkdtemp(prefix="bench_launcher_"))
    print(f"{a.runs} runs x {a.steps} steps on {cores} cores; hand-written loop threads per run: {threads}")
    try:
        plan = make_plan(work / "a_pool", a.runs, a.steps)
        dirs = {m: copy_runs(plan, work / m) for m in ("b_loop", "c_unlimited", "d_sequential")}
        times = {"a": pool(plan)}
        print(f"(a) sweeper local pool        {times['a']:7.1f} s", flush=True)
        entry = plan.task.entry
        times["b"] = shell(SHELL_LOOP, dirs["b_loop"], entry, threads)
        print(f"(b) shell loop, threads={threads:<3}   {times['b']:7.1f} s", flush=True)
        times["c"] = shell(UNLIMITED_LOOP, dirs["c_unlimited"], entry)
        print(f"(c) parallel, no thread limit {times['c']:7.1f} s", flush=True)
        times["d"] = shell(SEQUENTIAL, dirs["d_sequential"], entry)
        print(f"(d) one after another         {times['d']:7.1f} s", flush=True)
        results = {"a": [outcome(r.run_dir) for r in plan.runs]}
        results.update({m[0]: [outcome(d) for d in ds] for m, ds in dirs.items()})
        bad = {m: r for m, r in results.items() if any(s != "finished" for s, _ in r)}
        print(f"a/b = {times['a'] / times['b']:.3f}   (target <= 1.05: the pool costs at most 5% over the hand loop)")
        print(f"c/a = {times['c'] / times['a']:.2f}    (target >= 2.5: pinned threads vs oversubscription)")
        print(f"d/a = {times['d'] / times['a']:.2f}    (sequential vs the pool)")
        same = [x[1] == y[1] for x, y in zip(results["a"], results["b"])]
        print(f"(a) and (b) final val_loss bitwise equal per run: {same}")
        if bad:
            print(f"runs that did not finish: {bad} (logs under {work})")
            return 1
        return 0
    finally:
        if a.keep:
            print(f"run dirs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
