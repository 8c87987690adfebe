"""The rope demo in adaptive mode against the fixed 4-seed sweep: same decisions, how many runs (issue 15).

    python benchmarks/adaptive_demo.py                 # both sweeps on the local pool, ~10 min on 2 loaded CPUs
    python benchmarks/adaptive_demo.py --out /tmp/demo # keep the sweep dirs somewhere else
    python benchmarks/adaptive_demo.py --fixed DIR     # the fixed sweep from DIR (a finished `seeds=0-3` sweep of
                                                       # the same config, e.g. bench_first_sweep's): adaptive only

Runs, as a user would, `python -m sweeper +experiment=rope seeds=0-3` and `python -m sweeper +experiment=rope
seeds=adaptive` (the experiment's own adaptive settings: first look at 3 seeds, then 2 more per look up to 16,
Pocock spending, min_effect 0.02), each in a fresh sweep dir, then reads both sweeps back through sweeper.report's
analysis and sweeper.plan.looks: per comparison the fixed verdict, the adaptive verdict and the look it was decided
at; the runs each design launched. Writes benchmarks/results/adaptive_demo.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweeper.analysis.analyze import analyze_sweep  # noqa: E402
from sweeper.config.decision import DecisionOptions  # noqa: E402
from sweeper.plan.looks import read_looks  # noqa: E402

SWEEPS = {"fixed": ["seeds=0-3"], "adaptive": ["seeds=adaptive"]}


def run_sweep(name: str, out: Path) -> tuple[Path, float]:
    sweep_dir = out / name
    cmd = [sys.executable, "-m", "sweeper", "+experiment=rope", *SWEEPS[name], f"sweeper.dir={sweep_dir}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}      # this checkout's code and conf/, not an installed copy
    t0 = time.time()
    r = subprocess.run(cmd, cwd=out, capture_output=True, text=True, env=env)
    (out / f"{name}.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}); its log: {out / f'{name}.log'}\n"
                         f"{(r.stdout + r.stderr)[-2000:]}")
    return sweep_dir, time.time() - t0


def verdicts(sweep_dir: Path) -> tuple[dict[str, str], int]:
    """Per comparison its verdict, and the runs the sweep planned (sweeper.analysis.results' rows, via the report)."""
    inp = analyze_sweep(sweep_dir, DecisionOptions())
    return {f"{c.variant} vs {c.baseline}": c.verdict for c in inp.analysis.comparisons}, len(inp.runs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None, help="folder for the two sweep dirs (default: a temporary one)")
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--fixed", default=None, help="a finished fixed sweep dir to read instead of running one")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="adaptive-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    rows, walls, runs = {}, {}, {}
    for name in SWEEPS:
        if name == "fixed" and args.fixed:
            sweep_dir, walls[name] = Path(args.fixed), float("nan")      # its wall: wherever it was measured
            rows[name], runs[name] = verdicts(sweep_dir)
            print(f"{name} (read from {sweep_dir}): {runs[name]} runs: {rows[name]}", flush=True)
            continue
        if (out / name).exists():
            shutil.rmtree(out / name)
        sweep_dir, walls[name] = run_sweep(name, out)
        rows[name], runs[name] = verdicts(sweep_dir)
        print(f"{name}: {runs[name]} runs, {walls[name]:.0f} s: {rows[name]}", flush=True)
    looks = read_looks(out / "adaptive") or {}
    decided_at = looks.get("states") or {}                        # variant -> its comparison's state
    table = []
    for key, fixed in rows["fixed"].items():
        variant = key.split(" vs ")[0]
        state = decided_at.get(variant, {})
        looks_of = state.get("looks") or []
        table.append({"comparison": key, "fixed": fixed, "adaptive": rows["adaptive"].get(key),
                      "looks": len(looks_of), "seeds": looks_of[-1]["n"] if looks_of else None,
                      "adaptive_status": state.get("status"), "same": fixed == rows["adaptive"].get(key)})
    same = all(r["same"] for r in table)
    data = {"runs": runs, "wall_s": walls, "comparisons": table, "same_decisions": same, "fixed_from": args.fixed,
            "fewer_runs": runs["adaptive"] < runs["fixed"], "design": looks.get("design")}
    lines = [
        "# The rope demo: seeds=adaptive against the fixed 4-seed sweep (`python benchmarks/adaptive_demo.py`)",
        "",
        f"Local pool, 2 CPUs, the demo's default steps per run. Fixed `seeds=0-3`: {runs['fixed']} runs, "
        + (f"{walls['fixed']:.0f} s" if not args.fixed else f"read from {args.fixed}") + ". Adaptive "
        f"`seeds=adaptive` (design {looks.get('design')}): {runs['adaptive']} runs, {walls['adaptive']:.0f} s.",
        "",
        "| comparison | fixed verdict | adaptive verdict | adaptive: looks, seeds per arm at the stop | same |",
        "|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['comparison']} | {r['fixed']} | {r['adaptive']} | {r['looks']} look(s), {r['seeds']} seeds "
            f"| {'yes' if r['same'] else 'NO'} |"
        )
    lines += [
        "",
        f"- same decisions: {'yes' if same else 'NO'}",
        f"- runs: {runs['adaptive']} adaptive vs {runs['fixed']} fixed "
        f"({1 - runs['adaptive'] / runs['fixed']:.0%} fewer)",
    ]
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "adaptive_demo.json").write_text(json.dumps(data, indent=1, default=str))
    (results / "adaptive_demo.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if same and data["fewer_runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
