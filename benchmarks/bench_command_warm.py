"""Per-run cost of a python task.command against the same work as a task.entry, warm and cold, in one run.

    python benchmarks/bench_command_warm.py                 # 8 runs per mode, 2 slots; results/bench_command_warm.*
    python benchmarks/bench_command_warm.py --runs 16 --repeats 3

One user project (a temp dir) holds work.py: a small torch MLP trained for --steps steps, both as an entry point
`work:main` (the run API) and as a plain argparse script (`python work.py --seed N --steps S`, metrics printed as
a JSON line: zero glue). Each mode is one sweep of --runs seeds on the local pool (1 thread per run):
  entry            task.entry, forked by each slot's warm launcher (imports work.py and torch once)
  command          task.command, forked by the warm launcher too (torch preloaded from the script's imports)
  entry cold / command cold   the same with SWEEPER_COLD_START=1 (a fresh interpreter per run)
Per run: the sweep's wall time / runs x slots (what a run costs the pool), and the runs' own wall_time_s.
Modes are rotated across repeats; the median is reported. Target: command within 20% of entry per run.
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
sys.path.insert(0, str(ROOT))

WORK = '''import argparse, json
import torch
from torch import nn


def train(seed: int, steps: int) -> dict:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 32)                                    # (256, 32)
    y = x.sum(1, keepdim=True)                                  # (256, 1)
    for _ in range(steps):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"loss": loss.item()}


def main(run):
    return train(run.seed, run.config.steps)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int)
    a = p.parse_args()
    print(json.dumps(train(a.seed, a.steps)))
'''
EXPERIMENT = '''# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, work.py]
  args: [seed, steps]
steps: {steps}
experiment:
  name: work
  baseline: a
  metric: loss
  lower_is_better: true
  variants: {{a: []}}
'''
MODES = {"entry": ("entry", False), "command": ("command", False), "entry cold": ("entry", True),
         "command cold": ("command", True)}


def sweep(project: Path, mode: str, runs: int, tag: str) -> dict:
    kind, cold = MODES[mode]
    env = {**os.environ, "SWEEPER_PROGRESS": "plain", "PYTHONPATH": str(ROOT)}
    if cold:
        env["SWEEPER_COLD_START"] = "1"
    task = ["task.command=null", "task.entry=work:main", "task.args=none"] if kind == "entry" else []
    sweep_dir = project / "sweeps" / tag
    argv = [sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=work", f"seeds=0-{runs - 1}",
            "launcher.threads_per_run=1", "launcher.max_parallel=2", f"sweeper.dir={sweep_dir}",
            "sweeper.report=false", "sweeper.journal=off", *task]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    own = [json.loads(p.read_text())["wall_time_s"] for p in sweep_dir.glob("runs/a/seed_*/summary.json")]
    warm_line = next((ln for ln in (proc.stdout + proc.stderr).splitlines() if "starts" in ln and
                      ("warm" in ln or "cold" in ln)), "")
    return {"wall_s": wall, "per_run_s": wall * 2 / runs, "run_own_s": statistics.mean(own), "starts": warm_line}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args()
    results: dict[str, list[dict]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "conf" / "experiment").mkdir(parents=True)
        (project / "conf" / "experiment" / "work.yaml").write_text(EXPERIMENT.format(steps=args.steps))
        (project / "work.py").write_text(WORK)
        order = list(MODES)
        for r in range(args.repeats):
            for mode in order[r % len(order):] + order[:r % len(order)]:
                results[mode].append(sweep(project, mode, args.runs, f"{mode.replace(' ', '_')}_{r}"))
                print(mode, results[mode][-1], flush=True)
    med = {m: {k: statistics.median(x[k] for x in rs) for k in ("wall_s", "per_run_s", "run_own_s")}
           for m, rs in results.items()}
    ratio = med["command"]["per_run_s"] / med["entry"]["per_run_s"]
    result = {"runs": args.runs, "steps": args.steps, "repeats": args.repeats, "median": med, "raw": results,
              "command_over_entry": ratio, "load_avg_1m": os.getloadavg()[0]}
    print(json.dumps({"median": med, "command_over_entry": ratio}, indent=1))
    from benchmarks._results import write_results

    write_results(args.out, "bench_command_warm", result, [
        "# task.command vs task.entry per run (the same work), warm and cold", "",
        f"{args.runs} runs x {args.steps} steps per mode, 2 slots of 1 thread, median of {args.repeats}; load average "
        f"{result['load_avg_1m']:.2f} at the end; `python benchmarks/bench_command_warm.py --repeats {args.repeats}`",
        "", "| mode | sweep wall | per run (wall x slots / runs) | run's own time |", "|---|---|---|---|",
        *[f"| {m} | {v['wall_s']:.1f} s | {v['per_run_s']:.2f} s | {v['run_own_s']:.2f} s |" for m, v in med.items()],
        "", f"command / entry per run (warm): {ratio:.2f}"])


if __name__ == "__main__":
    main()
