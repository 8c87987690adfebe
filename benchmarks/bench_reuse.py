"""Incremental sweeps (issue 47), measured through the real CLI on a tiny project (tests/helpers/reuse_projects.py):

    python benchmarks/bench_reuse.py --out benchmarks/results     # both parts; --part add | plan for one

add:  a finished 2-variant x 4-seed sweep gains a variant: runs trained and reused, each run's finals against a
      from-scratch sweep of the same 3 variants (sweeper.reuse=false; bitwise, per run), and the wall of "add one
      variant" against the wall of its own 4 runs alone (an experiment of that variant only, in another folder),
      side by side, alternating, median of --repeats; target <= 1.1x.
plan: what reuse adds to planning when the sweeps folder holds 100 earlier sweeps of 1,000 runs each (synthetic
      manifests beside the real finished sweep): the same dry run with sweeper.reuse=true and =false, alternating,
      median of --repeats; target <= 1 s added. The lookup alone (sweeper.store.lookup.find_reuse on the composed
      plan, in one process) is timed too: on a loaded machine the two dry runs' difference is mostly noise.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from benchmarks._results import write_results  # noqa: E402
from sweeper.run.files.hashing import stable_hash  # noqa: E402
from tests.helpers.reuse_projects import add_variant, finals, reuse_project, started, sweep, sweep_dir_of  # noqa: E402


def timed(project: Path, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = sweep(project, *args, timeout=1200)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return wall, proc


def load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


def part_add(root: Path, repeats: int, steps: int) -> dict:
    """Each repeat adds the variant into its own folder, reusing from the first sweep's folder only (a repeat never
    reuses the variant's runs an earlier repeat trained)."""
    project = reuse_project(root)
    budget = f"steps={steps}"
    _, first = timed(project, "seeds=0-3", budget)
    add_variant(project, "narrow", ["width=2"])
    alone = reuse_project(root / "alone")
    cfg = alone / "conf" / "experiment" / "tiny.yaml"
    cfg.write_text(cfg.read_text().replace("baseline: base", "baseline: narrow").replace(
        "    base: []\n    wide:\n    - width=8\n", "    narrow:\n    - width=2\n"))
    walls_add, walls_alone, trained, lines, news = [], [], [], [], []
    for i in range(repeats):
        wall, proc = timed(project, "seeds=0-3", budget, f"sweeper.dir={root / f'added-{i}' / 'sweep'}",
                           f"sweeper.reuse_from=[{project / 'sweeps'}]")
        walls_add.append(wall)
        trained.append(len(started(proc)))
        lines.append(next((ln.split("] ", 1)[-1] for ln in (proc.stdout + proc.stderr).splitlines()
                           if "runs reused from" in ln), ""))
        news.append(sweep_dir_of(proc))
        wall, _ = timed(alone, "seeds=0-3", budget, f"sweeper.dir={root / f'alone-{i}'}", "sweeper.reuse=false")
        walls_alone.append(wall)
    _, scratch = timed(project, "seeds=0-3", budget, "sweeper.reuse=false", f"sweeper.dir={root / 'scratch'}")
    same = all(finals(new) == finals(root / "scratch") for new in news)
    add, solo = statistics.median(walls_add), statistics.median(walls_alone)
    return {"first_sweep": str(sweep_dir_of(first).name), "steps": steps, "trained": trained, "reused_lines": lines,
            "finals_bitwise_equal_per_run": same, "runs_compared": len(finals(news[0])), "wall_add_s": walls_add,
            "wall_alone_s": walls_alone, "ratio": add / solo, "scratch_trained": len(started(scratch))}


def synthetic_sweeps(folder: Path, template: Path, sweeps: int, runs: int) -> None:
    """`sweeps` sweep dirs of `runs` planned runs each (valid manifests only: their config hashes match no plan)."""
    manifest = json.loads((template / "sweep.json").read_text())
    for k in range(sweeps):
        entries = [{"run_id": f"v{i % 10}-s{i}-{k:04d}", "variant": f"v{i % 10}", "seed": i,
                    "run_dir": f"runs/v{i % 10}/seed_{i}", "config_hash": stable_hash([k, i])} for i in range(runs)]
        d = folder / f"synthetic-{k:03d}"
        d.mkdir(parents=True, exist_ok=True)
        experiment = {**manifest["experiment"], "variants": {f"v{i}": [f"width={i + 1}"] for i in range(10)},
                      "baseline": "v0"}
        (d / "sweep.json").write_text(json.dumps({**manifest, "experiment": experiment, "runs": entries,
                                                  "seeds": list(range(runs)), "changes": {},
                                                  "resources": {f"v{i}": {"ranks_per_run": 1} for i in range(10)}}))


def part_plan(root: Path, repeats: int, sweeps: int, runs: int) -> dict:
    project = reuse_project(root)
    _, first = timed(project, "seeds=0-3")
    synthetic_sweeps(project / "sweeps", sweep_dir_of(first), sweeps - 1, runs)
    add_variant(project, "narrow", ["width=2"])
    on, off, line = [], [], ""
    for _ in range(repeats):
        wall, proc = timed(project, "seeds=0-3", "sweeper.dry_run=true")
        on.append(wall)
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("reuse: "))
        off.append(timed(project, "seeds=0-3", "sweeper.dry_run=true", "sweeper.reuse=false")[0])
    alone = subprocess.run([sys.executable, "-c", LOOKUP, str(repeats)], cwd=project, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    if alone.returncode != 0:
        raise SystemExit(alone.stderr[-3000:])
    return {"earlier_sweeps": sweeps, "runs_each": runs, "dry_run_reuse_on_s": on, "dry_run_reuse_off_s": off,
            "added_s": statistics.median(on) - statistics.median(off), "reuse_line": line,
            **dict(zip(("lookup_s", "lookup_cpu_s"), json.loads(alone.stdout.splitlines()[-1])))}


LOOKUP = """
import json, sys, time
import os
from sweeper.config.composition.argv import with_config_dirs
from sweeper.config.sweep import compose_sweep
from sweeper.plan.pipeline import plan_sweep
from sweeper.run.files.manifest import Launch
from sweeper.store.lookup import find_reuse
times, cpu = [], []
for _ in range(int(sys.argv[1])):
    argv = with_config_dirs(["+experiment=tiny", "seeds=0-3", "launcher.threads_per_run=1"], [os.path.abspath("conf")])
    plan = plan_sweep(compose_sweep(argv, start_checks=False))
    plan.launch = Launch(threads_per_run=1)
    t, c = time.perf_counter(), time.process_time()
    find_reuse(plan)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
    assert len(plan.reused) == 8, plan.reused
print(json.dumps([times, cpu]))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=("add", "plan", "both"), default="both")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sweeps", type=int, default=100)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--steps", type=int, default=6, help="training steps of each run in the add part (its run time)")
    p.add_argument("--out", default=None, help="write bench_reuse.json/.md into this folder")
    args = p.parse_args()
    result, md = {"load_before": load(), "cpus": os.cpu_count()}, ["# Incremental sweeps (bench_reuse.py)", ""]
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("add", "both"):
            add = result["add"] = part_add(Path(tmp) / "add", args.repeats, args.steps)
            md += [f"- add one variant to a finished 2-variant x 4-seed sweep ({args.steps} steps per run): trained "
                   f"{add['trained']} (each repeat), `{add['reused_lines'][0]}`; finals bitwise equal per run to a "
                   f"from-scratch sweep (12 runs trained): {add['finals_bitwise_equal_per_run']} "
                   f"({add['runs_compared']} runs)",
                   f"- wall of adding the variant {statistics.median(add['wall_add_s']):.1f} s vs its 4 runs alone "
                   f"{statistics.median(add['wall_alone_s']):.1f} s: {add['ratio']:.2f}x (target <= 1.1x; median of "
                   f"{args.repeats}, alternating)"]
        if args.part in ("plan", "both"):
            plan = result["plan"] = part_plan(Path(tmp) / "plan", args.repeats, args.sweeps, args.runs)
            md += [f"- planning over {plan['earlier_sweeps']} earlier sweeps of {plan['runs_each']} runs: reuse adds "
                   f"{plan['added_s']:.2f} s to the dry run ({plan['reuse_line']}; target <= 1 s); the lookup alone "
                   f"{statistics.median(plan['lookup_s']):.2f} s wall, "
                   f"{statistics.median(plan['lookup_cpu_s']):.2f} CPU-s (median of {len(plan['lookup_s'])})"]
    result["load_after"] = load()
    md += ["", f"load average before/after: {result['load_before']} / {result['load_after']} on {os.cpu_count()} CPUs"]
    print("\n".join(md))
    if args.out:
        write_results(args.out, "bench_reuse", result, md)


if __name__ == "__main__":
    main()
