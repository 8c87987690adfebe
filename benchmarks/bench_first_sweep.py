"""The first sweep a newcomer runs, on the machine as it is and loaded, side by side: its wall, its preflight's share.

    python benchmarks/bench_first_sweep.py                  # both legs (~15 min on 2 loaded cores)
    python benchmarks/bench_first_sweep.py --steps 20       # a quick look (train.steps=20)

Each leg is README's first command, `python -m sweeper +experiment=rope seeds=0-3`, in a fresh sweep dir with its
output piped (plain progress lines, as in CI or `| tee`): "as is" on the machine as it is, "loaded" with one
busy-loop process per core running beside it the whole time. Reported per leg: the sweep's wall, the baseline
preflight's own time (its `preflight rope: PASS (N s)` line) and its share of the wall, when the first progress
line came (seconds after the command started), and the load average. The "as is" leg then extends the finished
sweep by one seed (`seeds=0-4 sweeper.extend=true`): the preflight must be kept, not run again (counted from the
output: `preflight rope: running` lines). Writes benchmarks/results/bench_first_sweep.{json,md}.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_results  # noqa: E402

PREFLIGHT = re.compile(r"preflight rope: (PASS|WARN|FAIL) \(([\d.]+)s\)")


def _spin() -> None:
    while True:
        pass


def sweep(args: list[str], cwd: Path) -> dict:
    env = {**os.environ, "SWEEPER_PROGRESS": "plain", "PYTHONPATH": str(ROOT)}
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "+experiment=rope", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first, lines, at = None, [], []
    for line in proc.stdout:
        if first is None and line.startswith("[sweeper"):
            first = time.time() - t0
        lines.append(line)
        at.append(time.time() - t0)
    code = proc.wait()
    wall = time.time() - t0
    out = "".join(lines)
    found = PREFLIGHT.search(out)
    preflight = float(found.group(2)) if found else 0.0
    began = next((t for t, line in zip(at, lines) if "preflight rope: running" in line), None)
    started = next((t for t, line in zip(at, lines) if "] start  " in line), None)
    waited = max(0.0, started - began) if began is not None and started is not None else 0.0
    return {"args": args, "exit": code, "wall_s": round(wall, 1), "first_line_s": round(first or wall, 1),
            "preflight_s": preflight, "preflight_share": round(preflight / wall, 4),
            "seeds_waited_s": round(waited, 1), "waited_share": round(waited / wall, 4),
            "preflights_run": out.count("preflight rope: running"), "preflights_kept": out.count("(kept from "),
            "load_avg_1m": round(os.getloadavg()[0], 2), "tail": out[-1500:]}


def report(args, result: dict) -> list[str]:
    """Write results/bench_first_sweep.{json,md} with the legs measured so far; the md lines."""
    md = ["# The first sweep, as is and loaded (`python benchmarks/bench_first_sweep.py"
          + (f" --steps {args.steps}" if args.steps else "") + "`)", "",
          f"README's first command, `python -m sweeper +experiment=rope seeds=0-3` ({result['steps']} steps per run, "
          f"12 runs), output piped; {result['cores']} cores shared with other work; \"loaded\": one busy loop per "
          "core beside it. The preflight runs in its own process at one slot's threads (OMP_WAIT_POLICY=PASSIVE).",
          "", "| leg | wall | preflight | share of wall | seeds waited on it (share) | first progress line "
          "| preflights run / kept | load avg (end) |",
          "|---|---|---|---|---|---|---|---|"]
    for name, leg in result["legs"].items():
        md.append(f"| {name} | {leg['wall_s']:.0f} s | {leg['preflight_s']:.1f} s "
                  f"| {100 * leg['preflight_share']:.1f}% "
                  f"| {leg.get('seeds_waited_s', 0):.1f} s ({100 * leg.get('waited_share', 0):.1f}%) "
                  f"| {leg['first_line_s']:.1f} s "
                  f"| {leg['preflights_run']} / {leg['preflights_kept']} | {leg['load_avg_1m']:.1f} |")
    md.append("")
    md.append("\"extend\": the finished \"as is\" sweep extended by one seed (`seeds=0-4 sweeper.extend=true`, "
              "3 runs). \"seeds waited on it\": from the preflight's start to the first run's start (the baseline's "
              "seeds start beside it, sweeper.execute.preflight_gate).")
    write_results(args.results, "bench_first_sweep", result, md)
    return md


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=None, help="train.steps (default: the shipped default, 100)")
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-first-sweep-"))
    extra = [f"train.steps={args.steps}"] if args.steps else []
    result = {"cores": os.cpu_count(), "steps": args.steps or 100, "legs": {}}
    legs = result["legs"]
    legs["as is"] = sweep(["seeds=0-3", *extra, f"sweeper.dir={work / 'as_is'}", "sweeper.journal=off"], work)
    report(args, result)                                   # after every leg: a cut run keeps what it measured
    legs["extend"] = sweep(["seeds=0-4", *extra, f"sweeper.dir={work / 'as_is'}", "sweeper.journal=off",
                            "sweeper.extend=true"], work)
    report(args, result)
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 1)]
    for s in spinners:
        s.start()
    try:
        legs["loaded"] = sweep(["seeds=0-3", *extra, f"sweeper.dir={work / 'loaded'}", "sweeper.journal=off"], work)
    finally:
        for s in spinners:
            s.terminate()
            s.join()
    print("\n".join(report(args, result)))
    return 0 if all(leg["exit"] == 0 for leg in legs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
