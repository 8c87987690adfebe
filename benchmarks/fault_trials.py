"""`python benchmarks/fault_trials.py [--stop-s 45]`: the faults issue 32 names, each as a user meets it.

Each trial runs real commands (`python -m sweeper ...`, `python -m sweeper.report ...`) on real files and, where
the machine allows (root, tmpfs), real mounts; it records what was printed (lines on stderr, a traceback or not),
the exit status, and whether the promise holds:
  ctrl_c_before_any_finished  a tiny rope sweep interrupted (SIGINT) while its first runs run, then the report:
                              exit 0, a status table and the resume command, no "pass --metric"
  sigstop_stall               a run SIGSTOPped for --stop-s seconds with the default launcher.stall_s (30): named
                              STALL while stopped, the run finishes after SIGCONT, nothing killed
  log_60_mib                  a run printing 60 MiB: its stdout.log at most launcher.max_log_mb (16 MiB), cut named
  summary_deleted             a finished run's summary.json deleted: the report says unknown, the same command
                              redoes only that run, with the same value
  report_read_only / report_full_disk   the report on a read-only / a full tmpfs: the decision table printed, what
                              was not written named, exit 1, no traceback
  against_other_experiment    --against a sweep of another experiment: refused in one line (exit 2)
  slurm_unreachable           `python -m sweeper.slurm cancel` where squeue cannot reach a controller: one line
Writes benchmarks/results/fault_trials.{json,md}. Takes about 2 minutes plus --stop-s on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_results  # noqa: E402
from sweeper.run.files.rundir import RunDir  # noqa: E402
from tests.helpers.commands import TINY  # noqa: E402
from tests.helpers.local_pool import user_project  # noqa: E402
from tests.helpers.synthetic_sweep import write_sweep  # noqa: E402


def env(**extra) -> dict:
    e = {**os.environ, "SWEEPER_PROGRESS": "plain", **extra}
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), e.get("PYTHONPATH")) if p)
    return e


def sweeper(*args, module: str = "sweeper", cwd: Path = ROOT, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env(**kw),
                          capture_output=True, text=True, timeout=900)


def said(proc) -> dict:
    err = proc.stderr.strip().splitlines()
    return {"exit": proc.returncode, "stderr_lines": len(err), "stderr": (err or [""])[-1][:200],
            "traceback": "Traceback" in proc.stdout + proc.stderr}


def mount(where: Path, options: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    return os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                                                capture_output=True).returncode == 0


def ctrl_c_before_any_finished(work: Path) -> dict:
    d = work / "cc"
    args = ["+experiment=rope", "~experiment.variants.rope_frozen_qk", "seeds=0-1", *TINY, "train.steps=200",
            f"sweeper.dir={d}", "sweeper.report=false"]
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *args], cwd=ROOT, env=env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not list(d.glob("runs/*/seed_*/metrics.jsonl")):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGINT)
    first = proc.wait(timeout=120)
    report = sweeper(d, "--no-plots", module="sweeper.report")
    finished = sum(RunDir(p).summary_path.exists() and RunDir(p).read_summary().status.value == "finished"
                   for p in d.glob("runs/*/seed_*"))
    return {**said(report), "sweep_exit": first, "finished_runs": finished,
            "ok": report.returncode == 0 and "no run has finished yet" in report.stdout
            and "pass --metric" not in report.stdout + report.stderr and finished == 0}


PAUSED = """import sweeper, time
run = sweeper.init()
print("started", flush=True)
deadline = time.time() + {busy}
while time.time() < deadline:
    sum(range(1000))
run.finish(val_loss=1.0)
"""


def sigstop_stall(work: Path, stop_s: float) -> dict:
    project = user_project(work / "stall", PAUSED.format(busy=8), {"a": []})
    d, out = work / "stall_sweep", work / "stall.log"
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=mine", "seeds=0",
                             f"sweeper.dir={d}", "sweeper.report=false"], cwd=project, env=env(),
                            stdout=open(out, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    rd = RunDir(d / "runs" / "a" / "seed_0")
    pid, deadline = None, time.time() + 300
    while pid is None and time.time() < deadline:
        try:
            pid = (rd.read_status().owner or {}).get("pid")
        except Exception:  # noqa: BLE001 - not written yet
            pass
        time.sleep(0.1)
    os.kill(pid, signal.SIGSTOP)
    t0 = time.time()
    named_after = None
    while time.time() - t0 < stop_s:
        if named_after is None and "STALL" in out.read_text():
            named_after = round(time.time() - t0, 1)
        time.sleep(0.5)
    os.kill(pid, signal.SIGCONT)
    code = proc.wait(timeout=300)
    text = out.read_text()
    line = next((ln for ln in text.splitlines() if "STALL" in ln), "")
    return {"exit": code, "stopped_s": stop_s, "named_after_s": named_after, "line": line[:200],
            "moving_again": "moving a/seed_0 again" in text, "status": rd.read_status().status.value,
            "ok": code == 0 and named_after is not None and named_after < stop_s
            and rd.read_status().status.value == "finished"}


LOUD = """import sweeper, sys
run = sweeper.init()
for i in range(1_200_000):
    sys.stdout.write(f"line {i:09d} " + "x" * 36 + "\\n")
run.finish(val_loss=1.0)
"""


def log_60_mib(work: Path) -> dict:
    project = user_project(work / "loud", LOUD, {"a": []})
    d = work / "loud_sweep"
    proc = sweeper("--config-dir", "conf", "+experiment=mine", "seeds=0", f"sweeper.dir={d}", "sweeper.report=false",
                   cwd=project)
    log = (d / "runs" / "a" / "seed_0" / "stdout.log").read_bytes()
    return {"exit": proc.returncode, "printed_bytes": 1_200_000 * 52, "kept_bytes": len(log),
            "cut_named": b"bytes of output cut here" in log, "last_line_kept": b"line 001199999" in log[-200:],
            "ok": proc.returncode == 0 and len(log) <= 16 * 2 ** 20 and b"bytes of output cut here" in log}


QUICK = """import sweeper
run = sweeper.init()
run.finish(val_loss=float(run.config["x"]) + run.seed)
"""


def summary_deleted(work: Path) -> dict:
    project = user_project(work / "quick", QUICK, {"a": [], "b": ["x=2"]}, config="x: 1")
    d = work / "quick_sweep"
    args = ["--config-dir", "conf", "+experiment=mine", "seeds=0-2", f"sweeper.dir={d}", "sweeper.report=false"]
    sweeper(*args, cwd=project)
    target = d / "runs" / "b" / "seed_1" / "summary.json"
    before = json.loads(target.read_text())["final"]
    target.unlink()
    report = sweeper(d, "--no-plots", "--resamples", "200", module="sweeper.report")
    again = sweeper(*args, cwd=project)
    started = [ln for ln in again.stdout.splitlines() if "start  " in ln]
    after = json.loads(target.read_text())["final"] if target.exists() else None
    return {"report_says_unknown": "1 unknown" in report.stdout, "rerun_exit": again.returncode,
            "runs_started_by_rerun": len(started), "same_value": after == before,
            "ok": "1 unknown" in report.stdout and again.returncode == 0 and len(started) == 1 and after == before}


def report_on(work: Path, how: str) -> dict | None:
    src = write_sweep(work / f"src_{how}", {"a": [1.0, 1.1, 1.2, 1.05], "b": [1.5, 1.6, 1.4, 1.55]})
    used = sum(p.stat().st_size // 4096 + 1 for p in src.rglob("*")) * 4
    mnt = work / f"mnt_{how}"
    if not mount(mnt, f"size={used + 16}k" if how == "full_disk" else "size=4m"):
        return None
    try:
        shutil.copytree(src, mnt / "s")
        if how == "read_only":
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        proc = sweeper(mnt / "s", "--resamples", "200", module="sweeper.report")
        return {**said(proc), "table_printed": "a beats b" in proc.stdout,
                "not_written_named": proc.stdout.count("WARNING: not written:"),
                "ok": proc.returncode == 1 and "a beats b" in proc.stdout and "WARNING: not written:" in proc.stdout
                and not said(proc)["traceback"] and said(proc)["stderr_lines"] == 1}
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def against_other_experiment(work: Path) -> dict:
    new = write_sweep(work / "new", {"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.4]}, name="alpha")
    old = write_sweep(work / "old", {"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.4]}, name="beta")
    proc = sweeper(new, "--against", old, "--no-plots", module="sweeper.report")
    return {**said(proc), "ok": proc.returncode == 2 and said(proc)["stderr_lines"] == 1
            and not (new / "compare_vs_old").exists()}


def slurm_unreachable(work: Path) -> dict:
    fake = work / "bin"
    fake.mkdir()
    (fake / "squeue").write_text("#!/bin/sh\necho 'squeue: error: resolve_ctls_from_dns_srv: res_nsearch error: "
                                 "Unknown host' >&2\necho 'squeue: error: fetch_config: DNS SRV lookup failed' >&2\n"
                                 "exit 1\n")
    (fake / "squeue").chmod(0o755)
    d = work / "slurm_sweep"
    d.mkdir()
    (d / "slurm.json").write_text(json.dumps({"jobs": {"r": {"job_id": "7_0", "run_dir": "runs/a/seed_0"}}}))
    proc = sweeper("cancel", d, module="sweeper.slurm", PATH=f"{fake}:{os.environ['PATH']}")
    return {**said(proc), "ok": proc.returncode == 1 and said(proc)["stderr_lines"] == 1}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stop-s", type=float, default=45.0, help="seconds the SIGSTOPped run stays stopped")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fault_trials_"))
    trials = {
        "ctrl_c_before_any_finished": lambda: ctrl_c_before_any_finished(work),
        "sigstop_stall": lambda: sigstop_stall(work, args.stop_s),
        "log_60_mib": lambda: log_60_mib(work),
        "summary_deleted": lambda: summary_deleted(work),
        "report_read_only": lambda: report_on(work, "read_only"),
        "report_full_disk": lambda: report_on(work, "full_disk"),
        "against_other_experiment": lambda: against_other_experiment(work),
        "slurm_unreachable": lambda: slurm_unreachable(work),
    }
    rows = {}
    try:
        for name, trial in trials.items():
            t0 = time.time()
            row = trial()
            if row is not None:
                row["wall_s"] = round(time.time() - t0, 1)
            rows[name] = row
            print(
                f"{name:<28} {'skipped (no tmpfs mount here)' if row is None else ('ok' if row['ok'] else 'FAIL')}"
                f"  {json.dumps(row)[:300] if row else ''}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ran = {k: v for k, v in rows.items() if v is not None}
    ok = sum(v["ok"] for v in ran.values())
    print(f"\n{ok}/{len(ran)} fault trials hold their promise ({len(rows) - len(ran)} skipped)")
    md = [
        "# Fault trials",
        "",
        f"`python benchmarks/fault_trials.py --stop-s {args.stop_s:g}`: the faults issue 32 "
        f"names, each as a user meets it (real commands, real files, real tmpfs mounts where allowed).",
        "",
        f"- **{ok}/{len(ran)}** hold their promise ({len(rows) - len(ran)} skipped)",
        "",
        "| trial | ok | what was seen |",
        "|---|---|---|",
    ]
    md += [
        f"| {k} | {'skipped' if v is None else ('yes' if v['ok'] else 'NO')} | "
        f"{'' if v is None else json.dumps({x: y for x, y in v.items() if x != 'ok'})[:400].replace('|', '/')} |"
        for k, v in rows.items()
    ]
    write_results(args.out, "fault_trials", {"ok": ok, "ran": len(ran), "trials": rows}, md)
    return 0 if ok == len(ran) else 1


if __name__ == "__main__":
    sys.exit(main())
