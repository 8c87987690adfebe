"""`python benchmarks/bad_input.py [--repeats 3]`: how fast bad input is answered, and that nothing starts.

Each bad command line (the kinds issue 32 names: keys, types, ranges, inf/nan, seeds, names that become paths,
files, YAML errors, the plan against its sweep dir) runs as a user runs it, `python -m sweeper ...`, in a fresh
temporary folder, wrapped so that the command's own interpreter counts every process it starts (Python audit
hooks: subprocess.Popen, os.fork, os.posix_spawn, os.exec*, os.system). For each: the exit status, the
number of stderr lines, processes started, files written, the wall time and the CPU time (user + system of the
command; the CPU time is what an idle machine's wall time comes close to, on a loaded one the wall time is not).
Then the same for a few faults (a read-only working directory when a tmpfs can be mounted). Writes
benchmarks/results/bad_input.{json,md}. Target: exit 2 (a read-only sweep dir too), one line, 0 processes, 0
files, < 1 s.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_results  # noqa: E402

WRAP = """import sys, os, runpy
spawned = []
def hook(event, args):
    if "nvidia-smi" in str(args):      # the device listing (a fake one in the GPU cases): not the task's process
        return
    if event.startswith(("subprocess.Popen", "os.fork", "os.posix_spawn", "os.spawn", "os.exec", "os.system")):
        spawned.append(event)
sys.addaudithook(hook)
import atexit
atexit.register(lambda: os.write(int(os.environ["SPAWN_FD"]), str(len(spawned)).encode()))
sys.argv = ["sweeper", *sys.argv[1:]]
runpy.run_module("sweeper", run_name="__main__", alter_sys=True)
"""
LONG = "x" * 300
FAKE_SMI = ROOT / "tests" / "fixtures" / "nvidia_smi"
TWO_GPUS = {"PATH": f"{FAKE_SMI}{os.pathsep}{os.environ.get('PATH', '')}",
            "NVIDIA_SMI_FIXTURE": str(FAKE_SMI / "pcie_2gpu_2socket")}
MANY = ("# @package _global_\ndefaults:\n  - override /task: custom\ntask:\n  command: [python, t.py]\nwidth: 0\n"
        "experiment:\n  name: many\n  baseline: v0\n  metric: val_loss\n  lower_is_better: true\n  variants:\n"
        + "".join(f"    v{i}: [width={i}]\n" for i in range(199)) + "    v199: [widht=199]\n")
EXPERIMENTS = {
    "many": MANY,
    "flow": "# @package _global_\nexperiment:\n  name: x\n  variants: {a: [x=1, }\n",
    "twice": "# @package _global_\nexperiment:\n  name: x\n  baseline: a\n  metric: m\n  lower_is_better: true\n"
             "  variants: {a: []}\n  name: y\n",
    "nopackage": "defaults:\n  - override /task: custom\nexperiment:\n  name: x\n  baseline: a\n  metric: m\n"
                 "  lower_is_better: true\n  variants: {a: [], b: [x=1]}\n",
}
CASES = [
    ("seeds range empty", ["seeds=3-1"]),
    ("seeds repeated", ["seeds=[0,0]"]),
    ("seed too large", [f"seeds={2**64}"]),
    ("unknown key", ["train.stepz=3"]),
    ("wrong type", ["train.steps=abc"]),
    ("out of range", ["train.steps=0"]),
    ("lr inf", ["train.lr=inf"]),
    ("rope_base nan", ["model.rope_base=nan"]),
    ("grace_s inf", ["launcher.grace_s=inf"]),
    ("threshold inf", ["+health.thresholds.ema_beta=inf"]),
    ("experiment name 300 chars", [f"experiment.name={LONG}"]),
    ("variant name 300 chars", [f"+experiment.variants.{LONG}=[]"]),
    ("sweeper.dir part too long", [f"sweeper.dir=s/{LONG}"]),
    ("missing corpus", ["data=text", "data.path=/no/such/corpus.txt"]),
    ("malformed override", ["train.steps=="]),
    ("unknown option", ["--bogus"]),
    ("unknown experiment", ["+experiment=nosuch"]),
    ("baseline not a variant", ["experiment.baseline=nosuch"]),
    ("too many runs", ["sweeper.max_runs=2"]),
    ("adaptive, start below 2", ["seeds=adaptive", "sweeper.adaptive.start=1"]),
    ("adaptive, min_effect inf", ["seeds=adaptive", "experiment.min_effect=inf"]),
    ("experiment YAML flow error", ["--config-dir", "conf", "+experiment=flow"]),
    ("experiment YAML repeated key", ["--config-dir", "conf", "+experiment=twice"]),
    ("experiment without @package", ["--config-dir", "conf", "+experiment=nopackage"]),
    # issue 40: still open from earlier sets, scale, the environment
    ("launcher.cores empty", ["launcher.cores=[]"]),
    ("threads above the cores", ["launcher.threads_per_run=1000"]),
    ("config group given a number", ["model=42"]),
    ("device not visible", ["launcher.devices=[9]"]),
    ("typo in the 200th variant", ["--config-dir", "conf", "+experiment=many"]),
    ("CUDA_VISIBLE_DEVICES=2,3, 2 GPUs", [], {**TWO_GPUS, "CUDA_VISIBLE_DEVICES": "2,3"}),
    ("CUDA_VISIBLE_DEVICES='', 2 GPUs", [], {**TWO_GPUS, "CUDA_VISIBLE_DEVICES": ""}),
    ("CUDA_VISIBLE_DEVICES=MIG-unknown", [], {**TWO_GPUS, "CUDA_VISIBLE_DEVICES": "MIG-0000-unknown"}),
    ("CUDA_VISIBLE_DEVICES=GPU-unknown", [], {**TWO_GPUS, "CUDA_VISIBLE_DEVICES": "GPU-0000-unknown"}),
]


def run_case(args: list[str], cwd: Path, with_rope: bool = True, extra_env: dict | None = None) -> dict:
    """One command in cwd: exit, stderr lines, processes started (nvidia-smi not counted: a device listing, the
    fake one in the GPU cases), files written, wall and CPU seconds. extra_env: set for the command."""
    argv = (["+experiment=rope"] if with_rope and not any(a.startswith("+experiment=") for a in args) else []) + args
    r, w = os.pipe()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "SPAWN_FD": str(w),
        **(extra_env or {}),
    }
    if extra_env and "CUDA_VISIBLE_DEVICES" not in extra_env:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", WRAP, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        pass_fds=(w,),
        timeout=300,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.close(w)
    spawned = os.read(r, 64).decode() or "?"
    os.close(r)
    written = sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*") if not str(p.relative_to(cwd)).startswith("conf"))
    return {
        "exit": proc.returncode,
        "stderr_lines": len(proc.stderr.strip().splitlines()),
        "first_line": (proc.stderr.strip().splitlines() or [""])[0][:160],
        "processes": spawned,
        "files": written,
        "wall_s": round(wall, 3),
        "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
        "traceback": "Traceback" in proc.stderr,
    }


def project(root: Path) -> None:
    (root / "conf" / "experiment").mkdir(parents=True, exist_ok=True)
    for name, text in EXPERIMENTS.items():
        (root / "conf" / "experiment" / f"{name}.yaml").write_text(text)


def read_only_cwd() -> dict | None:
    """The fault: a read-only working directory (a tmpfs mounted read-only; None where mount is not allowed)."""
    where = Path(tempfile.mkdtemp(prefix="bad_input_ro_"))
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(where)], capture_output=True
        ).returncode
        != 0
    ):
        return None
    try:
        return run_case(["seeds=0"], where)
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs per case (the median is reported)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    rows = []
    print(f"{'case':<32} {'exit':>4} {'lines':>5} {'procs':>5} {'files':>5} {'wall s':>7} {'cpu s':>6}  first line")
    for name, case, *extra in CASES:
        runs = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                project(Path(tmp))
                runs.append(run_case(case, Path(tmp), extra_env=extra[0] if extra else None))
        row = {
            **runs[-1],
            "case": name,
            "args": case,
            "wall_s": statistics.median(r["wall_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
        }
        rows.append(row)
        print(
            f"{name:<32} {row['exit']:>4} {row['stderr_lines']:>5} {row['processes']:>5} {len(row['files']):>5} "
            f"{row['wall_s']:>7.2f} {row['cpu_s']:>6.2f}  {row['first_line'][:90]}",
            flush=True,
        )
    fault = read_only_cwd()
    if fault is not None:
        print(
            f"{'fault: read-only working dir':<32} {fault['exit']:>4} {fault['stderr_lines']:>5} "
            f"{fault['processes']:>5} {len(fault['files']):>5} {fault['wall_s']:>7.2f} {fault['cpu_s']:>6.2f}  "
            f"{fault['first_line'][:90]}"
        )
    good = [
        r
        for r in rows
        if r["exit"] == 2 and r["stderr_lines"] == 1 and r["processes"] == "0" and not r["files"] and not r["traceback"]
    ]
    load = os.getloadavg()[0]
    summary = {
        "cases": len(rows),
        "exit2_one_line_nothing_started_or_written": len(good),
        "median_wall_s": statistics.median(r["wall_s"] for r in rows),
        "max_wall_s": max(r["wall_s"] for r in rows),
        "median_cpu_s": statistics.median(r["cpu_s"] for r in rows),
        "max_cpu_s": max(r["cpu_s"] for r in rows),
        "load_average": load,
        "rows": rows,
        "read_only_cwd": fault,
    }
    print(
        f"\n{len(good)}/{len(rows)} bad inputs: exit 2, one line, no process, no file; median wall "
        f"{summary['median_wall_s']:.2f} s (max {summary['max_wall_s']:.2f}), median CPU "
        f"{summary['median_cpu_s']:.2f} s "
        f"(max {summary['max_cpu_s']:.2f}); load average {load:.1f} on {os.cpu_count()} cores"
    )
    md = [
        "# Bad input: answered before anything starts",
        "",
        f"`python benchmarks/bad_input.py --repeats {args.repeats}` (load average {load:.1f} on {os.cpu_count()} "
        f"cores while it ran: the CPU time is the figure an idle machine's wall time comes close to)",
        "",
        f"- **{len(good)}/{len(rows)}** bad inputs: exit 2, one line, no process started, no file written",
        f"- median wall {summary['median_wall_s']:.2f} s (max {summary['max_wall_s']:.2f} s); median CPU "
        f"{summary['median_cpu_s']:.2f} s (max {summary['max_cpu_s']:.2f} s)",
        "",
        "| case | exit | lines | processes | files | wall s | CPU s | first line |",
        "|---|---|---|---|---|---|---|---|",
    ]
    md += [
        f"| {r['case']} | {r['exit']} | {r['stderr_lines']} | {r['processes']} | {len(r['files'])} | "
        f"{r['wall_s']:.2f} | "
        f"{r['cpu_s']:.2f} | {r['first_line'][:100].replace('|', '/')} |"
        for r in rows
    ]
    if fault is not None:
        md += [
            "",
            f"Fault, a read-only working directory (tmpfs mounted ro): exit {fault['exit']}, "
            f"{fault['stderr_lines']} line, {fault['processes']} processes, {len(fault['files'])} files: "
            f"`{fault['first_line']}`",
        ]
    write_results(args.out, "bad_input", summary, md)
    return 0 if len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
