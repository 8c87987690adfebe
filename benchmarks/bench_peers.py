"""`python benchmarks/bench_peers.py [--seeds 4] [--steps 150] [--repeats 2]`: the sweeper against what users pick.

    pip install -e '.[bench]'          # hydra-joblib-launcher and ray[tune]: benchmark-only, never a runtime dep
    python benchmarks/bench_peers.py --repeats 3 --out benchmarks/results

The rope baseline, seeds 0..N-1, `--steps` steps, every launcher training from the exact same frozen
config.yaml (the plan's, copied into fresh run dirs; the sweeper's own is checked byte-equal), one after
another in each repeat, the order rotated from repeat to repeat:
  sweeper      `python -m sweeper +experiment=rope ... sweeper.report=false` (the local pool, its defaults)
  sweeper_cold the same with SWEEPER_COLD_START=1: every run a fresh `python -m sweeper.run` (no warm launcher)
  joblib       a Hydra app calling sweeper.run.entry.run_entry (the run API), `--multirun
               hydra/launcher=joblib hydra.launcher.n_jobs=<cores>`
  ray          Ray Tune, `tune.with_resources(trainable, {"cpu": 1})`, grid over the run dirs
  shell        `OMP_NUM_THREADS=1 python -m sweeper.train DIR &` per run, then `wait`
  ideal        the sum of each run's own training time as a fresh process pays it (its summary's wall_time_s,
               sweeper_cold's runs: interpreter imports included) / slots
  floor        the sum of the warm runs' own time / slots + one import of the task per slot (the mean of cold
               minus warm own time per run): what no launcher that imports the task at least once per slot beats
and, once per repeat, the sweeper's own start: the same command with sweeper.dry_run=true.
Every launcher's final metrics are checked bitwise equal to the sweeper's, run by run (exit 1 otherwise).
Medians over the repeats and the sweeper's ratio to each go to OUT/bench_peers.{json,md}. Wall times are whole
commands (interpreter start, imports, Ray's start), as a user waits for them. Noisy on a shared machine:
the .md says the load average seen.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")
LAUNCHERS = ("sweeper", "sweeper_cold", "joblib", "ray", "shell")

JOBLIB_APP = '''
import hydra

@hydra.main(version_base=None, config_path=None, config_name=None)
def main(cfg):
    from sweeper.run.entry import run_entry
    return run_entry("sweeper.train:main", cfg.run_dir)

if __name__ == "__main__":
    main()
'''
RAY_APP = '''
import sys
import ray
from ray import tune

def trainable(config):
    from sweeper.run.entry import run_entry
    return {"exit_code": run_entry("sweeper.train:main", config["run_dir"])}

ray.init(num_cpus=int(sys.argv[1]), include_dashboard=False, log_to_driver=False)
tuner = tune.Tuner(tune.with_resources(trainable, {"cpu": 1}),
                   param_space={"run_dir": tune.grid_search(sys.argv[3:])},
                   run_config=tune.RunConfig(storage_path=sys.argv[2], verbose=0))
results = tuner.fit()
sys.exit(1 if results.errors or any(r.metrics.get("exit_code") != 0 for r in results) else 0)
'''
SHELL_LOOP = 'for d in "$@"; do OMP_NUM_THREADS=1 python -m sweeper.train "$d" > "$d/$LOG" 2>&1 & done; wait'


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def sweep_args(sweep_dir: Path, seeds: int, steps: int) -> list[str]:
    return ["+experiment=rope", "~experiment.variants.nope", "~experiment.variants.rope_frozen_qk",
            f"seeds=0-{seeds - 1}", f"train.steps={steps}", f"sweeper.dir={sweep_dir}", "sweeper.report=false"]


def frozen_plan(work: Path, seeds: int, steps: int):
    """The plan (and its frozen config.yaml per run) every launcher trains from."""
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan, write_plan

    args = sweep_args(work / "plan", seeds, steps)
    plan = make_plan(compose_sweep(args), list(range(seeds)))
    write_plan(plan, args)
    return plan


def fresh_dirs(plan, dest: Path) -> list[Path]:
    from sweeper.run.files.rundir import RunDir

    dirs = []
    for run in plan.runs:
        rd = RunDir(dest / f"seed_{run.seed}")
        rd.path.mkdir(parents=True)
        shutil.copy(run.rundir.config_path, rd.config_path)
        dirs.append(rd.path)
    return dirs


def timed(argv: list[str], cwd: Path, log: Path, extra_env: dict | None = None) -> float:
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env={**clean_env(), **(extra_env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}; see {log}")
    return wall


def launch(name: str, plan, work: Path, seeds: int, steps: int, slots: int) -> tuple[float, list[Path]]:
    """Run the plan's runs with one launcher in fresh dirs under work/name; (wall s, run dirs by seed)."""
    from sweeper.run.files.rundir import LOG

    base = work / name
    base.mkdir(parents=True)
    log = base / "launcher.log"
    if name in ("sweeper", "sweeper_cold"):
        cold = {"SWEEPER_COLD_START": "1"} if name == "sweeper_cold" else {}
        wall = timed([sys.executable, "-m", "sweeper", *sweep_args(base / "sweep", seeds, steps)], ROOT, log, cold)
        dirs = [run.rundir.path for run in plan.runs]
        dirs = [base / "sweep" / d.relative_to(plan.sweep_dir) for d in dirs]
        for ours, frozen in zip(dirs, plan.runs):
            if (ours / "config.yaml").read_bytes() != frozen.rundir.config_path.read_bytes():
                raise RuntimeError(f"{ours}: the sweeper's frozen config differs from the plan's")
        return wall, dirs
    dirs = fresh_dirs(plan, base / "runs")
    if name == "joblib":
        (base / "joblib_app.py").write_text(JOBLIB_APP)
        argv = [
            sys.executable,
            str(base / "joblib_app.py"),
            "--multirun",
            "hydra/launcher=joblib",
            f"hydra.launcher.n_jobs={slots}",
            f"hydra.sweep.dir={base / 'hydra'}",
            "+run_dir=" + ",".join(map(str, dirs)),
        ]
    elif name == "ray":
        (base / "ray_app.py").write_text(RAY_APP)
        argv = [sys.executable, str(base / "ray_app.py"), str(slots), str(base / "ray"), *map(str, dirs)]
    else:
        argv = ["bash", "-c", SHELL_LOOP.replace("$LOG", LOG), "loop", *map(str, dirs)]
    return timed(argv, ROOT, log), dirs


def finals(dirs: list[Path]) -> list[tuple]:
    from sweeper.run.files.rundir import RunDir

    out = []
    for d in dirs:
        s = RunDir(d).read_summary()
        out.append((s.status.value, s.final, s.wall_time_s) if s is not None else ("missing", None, None))
    return out


def available(name: str) -> str | None:
    """None when the launcher can run here, else why not."""
    module = {"joblib": "hydra_plugins.hydra_joblib_launcher", "ray": "ray.tune"}.get(name)
    if module is None:
        return None
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["import failed"])[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--only", default=",".join(LAUNCHERS), help="comma list of launchers to run")
    a = ap.parse_args()
    slots = len(os.sched_getaffinity(0))
    wanted = [n for n in LAUNCHERS if n in a.only.split(",")]
    missing = {n: why for n in wanted if (why := available(n))}
    names = [n for n in wanted if n not in missing]
    for n, why in missing.items():
        print(f"{n}: not installed here ({why}); pip install -e '.[bench]'")
    work = Path(tempfile.mkdtemp(prefix="bench_peers_"))
    walls: dict[str, list[float]] = {n: [] for n in names}
    walls["ideal"], walls["floor"], walls["dry_run"] = [], [], []
    own: dict[str, list[float]] = {n: [] for n in names}  # sum of the runs' own wall_time_s / slots, per launcher
    load = [os.getloadavg()[0]]
    mismatches = []
    try:
        plan = frozen_plan(work, a.seeds, a.steps)
        for r in range(a.repeats):
            order = names[r % len(names) :] + names[: r % len(names)]
            results = {}
            for name in order:
                wall, dirs = launch(name, plan, work / f"r{r}", a.seeds, a.steps, slots)
                walls[name].append(wall)
                results[name] = finals(dirs)
                own[name].append(sum(w or 0.0 for _, _, w in results[name]) / slots)
                load.append(os.getloadavg()[0])
                print(f"repeat {r} {name:8s} {wall:7.1f} s  (load {load[-1]:.1f})", flush=True)
            ref = results.get("sweeper") or results[order[0]]
            for name, res in results.items():
                for seed, (got, want) in enumerate(zip(res, ref)):
                    if got[0] != "finished" or got[1] != want[1]:
                        mismatches.append(f"repeat {r} {name} seed {seed}: {got[:2]} vs {want[:2]}")
            if "sweeper_cold" in results:
                cold, warm = results["sweeper_cold"], results.get("sweeper", results["sweeper_cold"])
                walls["ideal"].append(sum(w for _, _, w in cold) / slots)
                per_run_import = statistics.mean(c[2] - w[2] for c, w in zip(cold, warm))
                walls["floor"].append(sum(w for _, _, w in warm) / slots + per_run_import)
            dry = [
                sys.executable,
                "-m",
                "sweeper",
                *sweep_args(work / f"r{r}" / "dry", a.seeds, a.steps),
                "sweeper.dry_run=true",
            ]
            walls["dry_run"].append(timed(dry, ROOT, work / f"r{r}" / "dry_run.log"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {n: statistics.median(v) for n, v in walls.items() if v}
    own_med = {n: statistics.median(v) for n, v in own.items() if v}
    sw = med.get("sweeper")
    ratios = {n: sw / m for n, m in med.items() if sw is not None and n not in ("sweeper", "dry_run")}
    result = {
        "seeds": a.seeds,
        "steps": a.steps,
        "repeats": a.repeats,
        "slots": slots,
        "walls_s": walls,
        "median_s": med,
        "own_training_s": own_med,
        "sweeper_over": ratios,
        "bitwise_equal": not mismatches,
        "mismatches": mismatches,
        "not_installed": missing,
        "load_avg_1min": load,
        "command": " ".join(sys.argv),
    }
    labels = {
        "sweeper": "sweeper local pool (`python -m sweeper ...`, report off)",
        "sweeper_cold": "sweeper, cold starts (`SWEEPER_COLD_START=1`: a fresh interpreter per run)",
        "joblib": f"hydra-joblib-launcher, `n_jobs={slots}`, a Hydra app calling the run API",
        "ray": "Ray Tune, `with_resources(cpu=1)`",
        "shell": "shell loop (`OMP_NUM_THREADS=1 python -m sweeper.train DIR &` x N; wait)",
        "ideal": "ideal (sum of each run's own training time as a fresh process, cold runs / slots)",
        "floor": "floor (warm runs' own time / slots + one task import per slot)",
    }
    md = [
        f"# Side by side: rope baseline, {a.seeds} seeds x {a.steps} steps, {slots} cores",
        "",
        f"`{result['command']}`; median of {a.repeats} repeats, order rotated; 1-min load average "
        f"{min(load):.1f} to {max(load):.1f}; every final result bitwise equal across launchers: "
        f"{'yes' if not mismatches else 'NO'}. Runs' own time: the sum of the runs' own training time "
        f"(their summaries' "
        "wall_time_s) / slots under that launcher; wall minus it is what the launcher adds. A warm-started run's own "
        "time leaves out the imports its slot's warm launcher made once (torch, torch._dynamo), so the ideal is taken "
        "from the cold runs (each a fresh process, as the issue defines it) and the floor adds back one import per "
        "slot to the warm runs.",
        "",
        "| launcher | wall (median) | sweeper / it | runs' own time |",
        "|---|---|---|---|",
    ]
    md += [
        f"| {labels[n]} | {med[n]:.1f} s | {'1.00' if n == 'sweeper' else f'{ratios[n]:.2f}'} | "
        f"{f'{own_med[n]:.1f} s' if n in own_med else '-'} |"
        for n in (*LAUNCHERS, "ideal", "floor")
        if n in med
    ]
    md += [
        "",
        f"The sweeper's own start (`python -m sweeper ... sweeper.dry_run=true`: imports, compose, plan, the "
        f"task's import check): {med['dry_run']:.1f} s (median).",
    ]
    md += [f"- {n}: not installed ({why})" for n, why in missing.items()]
    from benchmarks._results import write_results

    write_results(a.out, "bench_peers", result, md)
    print("\n".join(md))
    if mismatches:
        print("final results differ:\n" + "\n".join(mismatches))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
