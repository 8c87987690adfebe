"""`python benchmarks/interrupt_trials.py [--n 30] [--seed 0] [--steps 30] [--name NAME]`: random interrupts, then the
same command.

A short sweep (the rope experiment's rope and nope variants x seeds 0-1, a tiny model, `--steps` steps,
checkpoints every 5) runs once uninterrupted (the reference), then N trials, each in a fresh sweep dir:
  1. start `python -m sweeper ...` and hit it with one of
       sigint          Ctrl-C                       double_sigint   Ctrl-C twice, 0.3 s apart
       sigterm         SIGTERM to the sweeper       sigkill_parent  SIGKILL of the sweeper itself
       sigkill_child   SIGKILL of one running run (the pool retries it; the command may still finish)
     at one of these moments: `plan` (the plan is being written), `finish` (a run has just written its final
     result), `random` (a uniform time within the reference sweep's wall time);
  2. run the same command again until it exits (at most 3 times) and count the attempts;
  3. compare every run's final val_loss and steps bitwise with the reference, and count orphans: processes that
     still name the trial's sweep dir after the rerun (and, for information, 20 s after the interrupt).
Prints a table and writes benchmarks/results/interrupt_trials.{json,md}. Target: N/N bitwise equal, 0 orphans.
A trial takes 20-60 s on 2 cores. Not a test (random moments), but any unequal trial is a bug to reproduce.
`--wide nope` makes that variant's runs 2 data-parallel ranks each (experiment.resources; results in
interrupt_trials_wide.{json,md}); sigkill_child then kills one run's rank 0, which takes the run down.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_results  # noqa: E402
from sweeper.run.files.reading import UnreadableFile  # noqa: E402
from sweeper.run.files.rundir import RunDir  # noqa: E402
from sweeper.run.files.status_values import Status  # noqa: E402

KINDS = ("sigint", "double_sigint", "sigterm", "sigkill_parent", "sigkill_child")
MOMENTS = ("plan", "finish", "random")
VARIANTS, SEEDS = ("rope", "nope"), (0, 1)
TINY = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.context=32", "train.batch_size=8",
        "train.eval_interval=10", "train.log_interval=5", "train.ckpt_interval=5", "train.eval_batches=2",
        "train.warmup_steps=2", "data.n_files=8", "health.preflight=false"]


EXTRA: list[str] = []     # --wide VARIANT: its resources


def sweep_args(sweep_dir: Path, steps: int) -> list[str]:
    return ["+experiment=rope", "~experiment.variants.rope_frozen_qk", "seeds=0-1", *TINY, f"train.steps={steps}",
            f"sweeper.dir={sweep_dir}", "sweeper.report=false", "launcher.grace_s=3", "launcher.retry_backoff_s=0.5",
            *EXTRA]


def env() -> dict:
    e = {**os.environ, "SWEEPER_PROGRESS": "plain"}
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), e.get("PYTHONPATH")) if p)
    return e


def start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sweeper", *args], cwd=ROOT, env=env(), stdout=open(log, "ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def rundirs(sweep_dir: Path) -> list[RunDir]:
    return [RunDir(sweep_dir / "runs" / v / f"seed_{s}") for v in VARIANTS for s in SEEDS]


def results(sweep_dir: Path) -> dict[str, tuple]:
    """run label -> (val_loss as its 8 bytes in hex, steps), or the reason there is none."""
    out = {}
    for rd in rundirs(sweep_dir):
        label = f"{rd.path.parent.name}/{rd.path.name}"
        try:
            summary = rd.read_summary()
        except UnreadableFile as e:
            out[label] = ("unreadable", str(e))
            continue
        if summary is None or summary.status is not Status.FINISHED:
            out[label] = ("not finished", None if summary is None else summary.status.value)
            continue
        value = summary.final.get("val_loss")
        out[label] = (struct.pack(">d", value).hex() if isinstance(value, float) else repr(value), summary.steps)
    return out


def processes_naming(text: str) -> list[int]:
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state not in ("Z", "X") and pid != os.getpid():
            found.append(pid)
    return found


def wait_until(cond, timeout: float, proc: subprocess.Popen) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def running_pid(sweep_dir: Path) -> int | None:
    for rd in rundirs(sweep_dir):
        try:
            record = rd.read_status()
        except UnreadableFile:
            continue
        if record.status is Status.RUNNING and record.owner and isinstance(record.owner.get("pid"), int):
            return record.owner["pid"]
    return None


def finished_one(sweep_dir: Path) -> bool:
    return any(rd.summary_path.exists() for rd in rundirs(sweep_dir))


def hit(proc: subprocess.Popen, kind: str, sweep_dir: Path) -> str:
    """Send the interrupt; what was hit (for the table)."""
    if kind == "sigkill_child":
        pid = running_pid(sweep_dir)
        if pid is None:
            if not wait_until(lambda: running_pid(sweep_dir) is not None, 60, proc):
                return "no run was running"
            pid = running_pid(sweep_dir)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return f"run pid {pid} already gone"
        return f"run pid {pid}"
    sig = {"sigint": signal.SIGINT, "double_sigint": signal.SIGINT, "sigterm": signal.SIGTERM,
           "sigkill_parent": signal.SIGKILL}[kind]
    os.kill(proc.pid, sig)
    if kind == "double_sigint":
        time.sleep(0.3)
        try:
            os.kill(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    return "sweeper"


def trial(i: int, rng: random.Random, work: Path, steps: int, ref: dict, ref_wall: float) -> dict:
    kind, moment = rng.choice(KINDS), rng.choice(MOMENTS)
    delay = round(rng.uniform(0.0, ref_wall), 2) if moment == "random" else None
    sweep_dir = work / f"trial_{i:03d}"
    log = work / f"trial_{i:03d}.log"
    args = sweep_args(sweep_dir, steps)
    t0 = time.time()
    proc = start(args, log)
    if moment == "plan":
        reached = wait_until(lambda: (sweep_dir / "runs").is_dir(), 120, proc)
    elif moment == "finish":
        reached = wait_until(lambda: finished_one(sweep_dir), 300, proc)
    else:
        time.sleep(delay)
        reached = proc.poll() is None
    target = hit(proc, kind, sweep_dir) if reached and proc.poll() is None else "(it had already exited)"
    try:
        first_rc = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        first_rc = proc.wait()
    deadline = time.time() + 20          # an orphaned run checkpoints and stops by itself (PR_SET_PDEATHSIG)
    while processes_naming(str(sweep_dir)) and time.time() < deadline:
        time.sleep(0.2)
    left_after_interrupt = len(processes_naming(str(sweep_dir)))
    reruns, rerun_rc = 0, None
    while reruns < 3 and rerun_rc != 0:
        reruns += 1
        rerun_rc = subprocess.run([sys.executable, "-m", "sweeper", *args], cwd=ROOT, env=env(),
                                  stdout=open(log, "ab"), stderr=subprocess.STDOUT, timeout=600).returncode
    got = results(sweep_dir)
    equal = sum(got[k] == ref[k] for k in ref)
    orphans = processes_naming(str(sweep_dir))
    text = log.read_text(errors="replace")
    row = {"trial": i, "kind": kind, "moment": moment, "delay_s": delay, "hit": target, "first_rc": first_rc,
           "reruns": reruns, "rerun_rc": rerun_rc, "equal": equal, "runs": len(ref), "orphans": len(orphans),
           "left_20s_after_interrupt": left_after_interrupt, "tracebacks": text.count("Traceback (most recent"),
           "wall_s": round(time.time() - t0, 1),
           "unequal": {k: {"got": got[k], "ref": ref[k]} for k in ref if got[k] != ref[k]}}
    for pid in orphans:                  # leave nothing behind for the next trial
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="number of trials")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random kinds, moments and delays")
    ap.add_argument("--steps", type=int, default=30, help="train.steps of each run")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default=None, help="results file name (OUT/NAME.json and .md; default "
                    "interrupt_trials, interrupt_trials_wide with --wide)")
    ap.add_argument("--keep", action="store_true", help="keep the sweep dirs (printed)")
    ap.add_argument("--wide", choices=VARIANTS, help="this variant's runs: 2 data-parallel ranks each")
    args = ap.parse_args(argv)
    if args.wide:
        EXTRA[:] = [f"+experiment.resources={{{args.wide}: {{ranks_per_run: 2}}}}"]
    name = args.name or ("interrupt_trials_wide" if args.wide else "interrupt_trials")
    wide = f" --wide {args.wide}" if args.wide else ""
    if args.n < 1 or args.steps < 1:
        ap.error("--n and --steps must be positive")
    work = Path(tempfile.mkdtemp(prefix="interrupt_trials_"))
    rng = random.Random(args.seed)
    try:
        t0 = time.time()
        ref_dir = work / "reference"
        proc = subprocess.run([sys.executable, "-m", "sweeper", *sweep_args(ref_dir, args.steps)], cwd=ROOT, env=env(),
                              capture_output=True, text=True, timeout=900)
        ref_wall = time.time() - t0
        ref = results(ref_dir)
        if proc.returncode != 0 or any(v[0] in ("unreadable", "not finished") for v in ref.values()):
            print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
            print(f"interrupt_trials: the reference sweep did not finish (exit {proc.returncode})", file=sys.stderr)
            return 1
        print(f"reference sweep: {len(ref)} runs in {ref_wall:.1f}s ({work})")
        rows = []
        header = (f"{'#':>3}  {'kind':<15} {'moment':<7} {'delay':>6}  {'first':>5}  {'reruns':>6}  {'equal':>5}  "
                  f"orphans")
        print(header)
        for i in range(args.n):
            row = trial(i, rng, work, args.steps, ref, ref_wall)
            rows.append(row)
            delay = f"{row['delay_s']:.2f}" if row["delay_s"] is not None else "-"
            print(
                f"{i:>3}  {row['kind']:<15} {row['moment']:<7} {delay:>6}  {row['first_rc']:>5}  "
                f"{row['reruns']:>6}  {row['equal']}/{row['runs']}  {row['orphans']}"
                + (f"   UNEQUAL {row['unequal']}" if row["unequal"] else ""),
                flush=True,
            )
        all_equal = sum(r["equal"] == r["runs"] and r["rerun_rc"] == 0 for r in rows)
        orphans = sum(r["orphans"] for r in rows)
        tracebacks = sum(r["tracebacks"] for r in rows)
        summary = {
            "n": args.n,
            "seed": args.seed,
            "steps": args.steps,
            "wide": args.wide,
            "reference_wall_s": round(ref_wall, 1),
            "trials_bitwise_equal": all_equal,
            "orphans": orphans,
            "tracebacks": tracebacks,
            "first_exit_codes": sorted({r["first_rc"] for r in rows}),
            "trials": rows,
        }
        print(
            f"\n{all_equal}/{args.n} trials bitwise equal to the uninterrupted sweep, {orphans} orphans, "
            f"{tracebacks} tracebacks in the sweepers' output"
        )
        md = [
            "# Interrupt trials",
            "",
            f"`python benchmarks/interrupt_trials.py --n {args.n} --seed {args.seed} --steps {args.steps}{wide}"
            f"{' --name ' + args.name if args.name else ''}`: "
            f"rope, nope x seeds 0-1, {args.steps} steps{f' ({args.wide}: 2 ranks per run)' if args.wide else ''}; "
            f"each trial interrupts the sweep once, then runs the same "
            f"command again.",
            "",
            f"- **{all_equal}/{args.n}** trials ended with every final val_loss and step count bitwise equal to the "
            f"uninterrupted sweep",
            f"- **{orphans}** orphan processes after the reruns",
            f"- {tracebacks} tracebacks in the sweepers' output; first exit codes: "
            f"{', '.join(map(str, summary['first_exit_codes']))}",
            "",
            "| # | kind | moment | delay s | first exit | reruns | equal | orphans |",
            "|---|---|---|---|---|---|---|---|",
        ]
        md += [
            f"| {r['trial']} | {r['kind']} | {r['moment']} | {r['delay_s'] if r['delay_s'] is not None else '-'} | "
            f"{r['first_rc']} | {r['reruns']} | {r['equal']}/{r['runs']} | {r['orphans']} |"
            for r in rows
        ]
        write_results(args.out, name, summary, md)
        print(f"wrote {Path(args.out) / (name + '.json')} and .md")
        return 0 if all_equal == args.n and orphans == 0 else 1
    finally:
        if args.keep:
            print(f"sweep dirs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
