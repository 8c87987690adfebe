"""Faults named and recovered (issue 32.3-32.6): logs cut to size, stalled runs named, the report writes what it
can, lost results redone, comparisons across experiments refused. Real files, real processes, real mounts where
the machine allows them (a tiny or read-only tmpfs), else the same fault raised by the write itself."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.backends.local.watch import RunWatch
from sweeper.cli.report import main as report_main
from sweeper.run.files.logcap import cap_log, stopped_group
from sweeper.run.files.records import Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.local_pool import child_env, run, run_dir, user_project, wait_for
from tests.helpers.no_process import run_in_process
from tests.helpers.synthetic_sweep import write_sweep

pytest_plugins = ["tests.helpers.local_pool"]

FAST = ["--no-plots", "--resamples", "200"]
WRITER = "import sys\nfor i in range({n}): sys.stdout.write(f'line {{i:09d}} ' + 'x' * 36 + '\\n')\n"  # 52 bytes a line


def numbered(data: bytes) -> list[int]:
    return [int(line.split()[1]) for line in data.split(b"\n") if line.startswith(b"line ") and len(line) == 51]


# -- stdout.log capped ------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("where", ["tmp", "shm"])
def test_cap_log_keeps_the_head_and_a_consecutive_tail_while_the_writer_runs(tmp_path, where):
    """ext4/xfs collapse the middle in place; tmpfs (/dev/shm) is rewritten with the writer held still: either
    way no line of the kept tail is lost or out of order, and the cut is named."""
    folder = tmp_path if where == "tmp" else Path("/dev/shm")
    if not folder.is_dir():
        pytest.skip("no /dev/shm")
    path = folder / f"cap-{os.getpid()}-{where}.log"
    path.unlink(missing_ok=True)
    n, limit = 400_000, 2 * 2**20  # 20 MiB printed, 2 MiB allowed
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(n=n)], stdout=open(path, "ab"), start_new_session=True
    )
    cuts = 0
    while writer.poll() is None:
        cuts += cap_log(path, limit, pause=stopped_group(writer.pid)) > 0
        time.sleep(0.02)
    cap_log(path, limit)
    data = path.read_bytes()
    path.unlink()
    assert len(data) <= limit and cuts >= 1
    lines = numbered(data)
    assert lines[0] == 0 and lines[-1] == n - 1  # the first and the last line are kept
    cut_at = data.index(b"=== sweeper: ")
    marker = data[cut_at : data.index(b"\n", cut_at)]
    assert b"bytes of output cut here" in marker and b"launcher.max_log_mb" in marker
    cut = int(marker.split()[2])
    assert 0.8 * n * 52 < cut < n * 52  # the count is the bytes cut
    tail = numbered(data[cut_at:])
    assert tail == list(range(tail[0], n)), "the kept tail lost or reordered a line"


def test_cap_log_does_nothing_under_the_limit_or_without_one(tmp_path):
    path = tmp_path / "stdout.log"
    path.write_bytes(b"x" * 1000)
    assert cap_log(path, 2000) == 0 and cap_log(path, None) == 0 and path.read_bytes() == b"x" * 1000
    assert cap_log(tmp_path / "missing.log", 10) == 0


LOUD = """import sweeper, sys
run = sweeper.init()
for i in range(1_200_000):
    sys.stdout.write(f"line {i:09d} " + "x" * 36 + "\\n")
run.finish(val_loss=1.0)
"""


@pytest.mark.slow
def test_a_run_printing_60_mib_keeps_a_capped_log(tmp_path):
    project = user_project(tmp_path / "p", LOUD, {"a": []})
    d = tmp_path / "s"
    proc = run(
        [
            "--config-dir",
            "conf",
            "+experiment=mine",
            "seeds=0",
            f"sweeper.dir={d}",
            "sweeper.report=false",
            "launcher.max_log_mb=4",
        ],
        cwd=project,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = (run_dir(d, "a") / "stdout.log").read_bytes()
    assert len(log) <= 4 * 2**20, len(log)  # 61 MB printed
    assert b"bytes of output cut here" in log
    assert numbered(log)[-1] == 1_199_999


# -- stalled runs -----------------------------------------------------------------------------------------------


class Said:
    """A Progress stand-in that keeps what would be printed (the watch calls log, stalled, stall_over)."""

    def __init__(self):
        self.lines: list[str] = []

    def log(self, msg):
        self.lines.append(msg)

    def stalled(self, run, idle_s, why):
        self.lines.append(f"STALL {run.label} {idle_s:.0f}s {why}")

    def stall_over(self, run, idle_s):
        self.lines.append(f"moving {run.label}")


class Child:
    def __init__(self, proc, job):
        self.proc, self.job = proc, job


class Job:
    def __init__(self, d: Path):
        self.key = self.label = "a/seed_0"
        self.run_dir, self.log_path = d, d / "stdout.log"


@pytest.mark.slow
def test_the_watch_names_a_stopped_run_once_and_its_recovery_and_kills_only_when_asked(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: sum(range(10000))"], start_new_session=True
    )
    try:
        child, said = Child(proc, Job(tmp_path)), Said()
        watch = RunWatch(stall_s=5, stall_kill=False)
        t0 = time.time()
        assert not watch.check(child, said, now=t0)
        time.sleep(0.3)
        assert not watch.check(child, said, now=t0 + 3)  # files quiet: its CPU time is read
        time.sleep(0.3)
        assert not watch.check(child, said, now=t0 + 6) and not said.lines  # it computes: not stalled
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        for dt in (9, 12, 15, 20):
            assert not watch.check(child, said, now=t0 + dt)  # never killed without stall_kill
        stalls = [s for s in said.lines if s.startswith("STALL")]
        assert len(stalls) == 1 and "stopped (SIGSTOP" in stalls[0] and f"kill -CONT {proc.pid}" in stalls[0]
        assert "nothing is killed" in stalls[0]
        os.killpg(proc.pid, signal.SIGCONT)
        time.sleep(0.5)
        watch.check(child, said, now=t0 + 23)
        assert said.lines[-1] == "moving a/seed_0"
        assert RunWatch(stall_s=5, stall_kill=True).check(child, said, now=t0) is False
        killer = RunWatch(stall_s=5, stall_kill=True)
        killer.check(child, said, now=t0)
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert any(killer.check(child, said, now=t0 + dt) for dt in (3, 6, 9))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_stopped_script_under_a_waiting_wrapper_is_named_stopped_not_sleeping(tmp_path):
    """The run's process group: a wrapper (as sweeper.run.command is) waits on the user's script; the script alone
    is SIGSTOPped. The stall names the script's pid as stopped, not the sleeping wrapper (issue 40)."""
    wrapper = ("import subprocess, sys\n"
               "child = subprocess.Popen([sys.executable, '-c', 'while True: sum(range(10000))'])\n"
               "print(child.pid, flush=True)\nchild.wait()\n")
    proc = subprocess.Popen([sys.executable, "-c", wrapper], start_new_session=True, stdout=subprocess.PIPE)
    try:
        script = int(proc.stdout.readline())
        os.kill(script, signal.SIGSTOP)
        time.sleep(0.2)
        child, said = Child(proc, Job(tmp_path)), Said()
        watch = RunWatch(stall_s=5)
        t0 = time.time()
        for dt in (0, 3, 6):
            watch.check(child, said, now=t0 + dt)
        stalls = [s for s in said.lines if s.startswith("STALL")]
        assert len(stalls) == 1, said.lines
        assert f"process {script} is stopped (SIGSTOP or SIGTSTP): `kill -CONT {script}` resumes it" in stalls[0]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


PAUSED = """import sweeper, time, pathlib
run = sweeper.init()
print("started", flush=True)
deadline = time.time() + {busy}
while time.time() < deadline:
    sum(range(1000))
run.finish(val_loss=1.0)
"""


@pytest.mark.slow
def test_a_sigstopped_run_is_named_stalled_and_finishes_after_sigcont(tmp_path):
    project = user_project(tmp_path / "p", PAUSED.format(busy=14), {"a": []})
    d, out = tmp_path / "s", tmp_path / "out.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "--config-dir",
            "conf",
            "+experiment=mine",
            "seeds=0",
            f"sweeper.dir={d}",
            "sweeper.report=false",
            "launcher.stall_s=3",
        ],
        cwd=project,
        env=child_env(),
        stdout=open(out, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    pid = wait_for(
        lambda: (
            (RunDir(run_dir(d, "a")).read_status().owner or {}).get("pid")
            if run_dir(d, "a").joinpath("status.json").exists()
            else None
        ),
        120,
        "the run to start",
        proc,
        out,
    )
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: "STALL" in out.read_text(), 60, "the stall to be named", proc, out)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert proc.wait(timeout=120) == 0, out.read_text()
    text = out.read_text()
    assert "STALL  a/seed_0: no new output, metrics or CPU time for" in text and "stopped (SIGSTOP" in text
    assert "moving a/seed_0 again" in text
    assert RunDir(run_dir(d, "a")).read_status().status is Status.FINISHED


# -- finished work never silently lost --------------------------------------------------------------------------


def test_a_finished_run_without_its_summary_is_unknown_and_becomes_runnable(tmp_path):
    root = write_sweep(tmp_path / "s", {"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.4]})
    rd = RunDir(root / "runs" / "b" / "seed_1")
    rd.summary_path.unlink()
    result = run_in_process(report_main, [str(root), *FAST], cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "1 unknown" in result.stdout and "its result is unknown" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("b "))
    assert row.split()[3:5] == ["2/3", "0"], row  # b: usable 2 of 3, lost 0 (not a lost seed)
    assert rd.outcome() is Status.INTERRUPTED  # the launcher runs it again
    assert "its result is lost" in rd.read_status().error
    damaged = RunDir(root / "runs" / "a" / "seed_2")
    damaged.summary_path.write_bytes(b'{"status": "fini')
    assert damaged.outcome() is Status.INTERRUPTED and "cannot be read" in damaged.read_status().error
    assert RunDir(root / "runs" / "a" / "seed_0").outcome() is Status.FINISHED


QUICK = """import sweeper
run = sweeper.init()
print("ran", flush=True)
run.finish(val_loss=float(run.config["x"]) + run.seed)
"""


@pytest.mark.slow
def test_the_same_command_redoes_a_run_whose_summary_vanished(tmp_path):
    project = user_project(tmp_path / "p", QUICK, {"a": [], "b": ["x=2"]}, config="x: 1")
    d = tmp_path / "s"
    args = ["--config-dir", "conf", "+experiment=mine", "seeds=0-1", f"sweeper.dir={d}", "sweeper.report=false"]
    assert run(args, cwd=project).returncode == 0
    before = json.loads((run_dir(d, "b", 1) / "summary.json").read_text())["final"]
    (run_dir(d, "b", 1) / "summary.json").unlink()
    again = run(args, cwd=project)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "redo   b/seed_1: finished, but its summary.json is missing" in again.stdout
    assert "skip   a/seed_0" in again.stdout and "start  b/seed_1" in again.stdout
    assert json.loads((run_dir(d, "b", 1) / "summary.json").read_text())["final"] == before


@pytest.mark.slow
def test_against_another_experiment_is_refused_unless_asked(tmp_path):
    new = write_sweep(tmp_path / "new", {"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.4]}, name="alpha")
    old = write_sweep(tmp_path / "old", {"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.4]}, name="beta")
    refused = run_in_process(report_main, [str(new), "--against", str(old), *FAST], cwd=tmp_path)
    assert refused.code == 2 and "experiment 'alpha'" in refused.stderr and "--any-experiment" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (new / "compare_vs_old").exists()
    allowed = run_in_process(report_main, [str(new), "--against", str(old), "--any-experiment", *FAST], cwd=tmp_path)
    assert allowed.code == 0, allowed.stderr
    same = write_sweep(tmp_path / "same", {"a": [1.0, 1.1, 1.2], "b": [1.5, 1.6, 1.4]}, name="alpha")
    assert run_in_process(report_main, [str(new), "--against", str(same), *FAST], cwd=tmp_path).code == 0


# -- the report: the decision table always, what it could not write named ---------------------------------------


def test_a_sweep_with_no_finished_run_reports_statuses_and_how_to_resume(tmp_path):
    root = write_sweep(
        tmp_path / "s", {"a": [1.0, 1.0], "b": [1.0, 1.0]}, status={(v, s): "interrupted" for v in "ab" for s in (0, 1)}
    )
    for rd in (RunDir(p) for p in (root / "runs").glob("*/seed_*")):  # what a stopped run leaves: its cost
        rd.write_summary(
            Summary(status=Status.INTERRUPTED, steps=3, extra={"cost": {"wall_time_s": 1.0, "peak_rss_mb": 90.0}})
        )
    result = run_in_process(report_main, [str(root), *FAST], cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "pass --metric" not in result.stdout + result.stderr
    assert "runs: 4 interrupted" in result.stdout and "no run has finished yet" in result.stdout
    assert "python -m sweeper.resume" in result.stdout and (root / "report.md").exists()


def _mount(where: Path, options: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return (
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True).returncode
        == 0
    )


def _finished(root: Path) -> Path:
    return write_sweep(root, {"a": [1.0, 1.1, 1.2, 1.05], "b": [1.5, 1.6, 1.4, 1.55]})


@pytest.mark.slow
def test_the_report_of_a_full_disk_prints_the_table_and_names_what_was_not_written(tmp_path, monkeypatch):
    """The same fault as a full disk, raised by the write of report.md (portable: no mount needed)."""
    import sweeper.report.write as write

    root = _finished(tmp_path / "s")
    real = write.atomic_write_text

    def full(path, text):
        if Path(path).name == "report.md":
            with open(os.devnull, "w") as f:
                f.write(text)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, text)

    monkeypatch.setattr(write, "atomic_write_text", full)
    result = run_in_process(report_main, [str(root), *FAST], cwd=tmp_path)
    assert result.code == 1
    assert any(line.startswith("b ") and "vs a" in line for line in result.stdout.splitlines())
    assert "a beats b" in result.stdout  # the decision table
    warning = next(line for line in result.stdout.splitlines() if line.startswith("WARNING: not written:"))
    assert f"{root / 'report.md'}: No space left on device; the disk is full" in warning, warning
    assert (root / "summary.csv").exists() and not (root / "report.md").exists()
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and "the decision table above is complete" in err[0] and "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("options", ["full", "ro"])
def test_the_report_on_a_real_full_or_read_only_file_system(tmp_path, options):
    mnt = tmp_path / "mnt"
    src = _finished(tmp_path / "src")
    used = sum(p.stat().st_size // 4096 + 1 for p in src.rglob("*")) * 4  # KiB the copy takes on a tmpfs
    if not _mount(mnt, f"size={used + 16}k" if options == "full" else "size=4m"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        subprocess.run(["cp", "-r", str(src), str(mnt / "s")], check=True)
        if options == "ro":
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        result = run_in_process(report_main, [str(mnt / "s"), "--resamples", "200"], cwd=tmp_path)
        assert result.code == 1, result.stdout + result.stderr
        assert "a beats b" in result.stdout and "WARNING: not written:" in result.stdout
        why = "Read-only file system" if options == "ro" else "No space left on device"
        assert why in result.stdout and "Traceback" not in result.stderr
        assert not list((mnt / "s").rglob(".*.tmp")), "a half-written file was left behind"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["cwd", "sweeper.dir"])
def test_a_read_only_sweep_dir_is_one_line_exit_2_before_anything_starts(tmp_path, where):
    """A read-only place for the sweep dir (the working directory it defaults to, or sweeper.dir) is the user's
    choice: exit 2, one line naming sweeper.dir, nothing started (issue 40)."""
    from sweeper.cli.sweep import main as sweep_main

    mnt = tmp_path / "ro"
    if not _mount(mnt, "size=64k,ro"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        extra = [f"sweeper.dir={mnt / 'sweep'}"] if where == "sweeper.dir" else []
        result = run_in_process(sweep_main, ["+experiment=rope", "seeds=0", *extra],
                                cwd=mnt if where == "cwd" else tmp_path)
        assert result.code == 2 and result.started == [], result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "is on a read-only file system; choose a writable sweeper.dir" in lines[0]
        assert lines[0].startswith("sweeper: error: sweeper.dir=") and str(mnt) in lines[0], lines
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- Slurm unreachable ------------------------------------------------------------------------------------------


def test_slurm_cancel_without_a_cluster_is_one_line(tmp_path, monkeypatch):
    from sweeper.cli.slurm import main as slurm_main

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text(
        "#!/bin/sh\n"
        + "".join(
            f"echo 'squeue: error: {w}' >&2\n"
            for w in (
                "resolve_ctls_from_dns_srv: res_nsearch error: Unknown host",
                "fetch_config: DNS SRV lookup failed",
            )
        )
        + "exit 1\n"
    )
    (fake / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    sweep = tmp_path / "s"
    sweep.mkdir()
    (sweep / "slurm.json").write_text(json.dumps({"jobs": {"r": {"job_id": "7_0", "run_dir": "runs/a/seed_0"}}}))
    for command in ("cancel", "status"):
        result = run_in_process(slurm_main, [command, str(sweep)], cwd=tmp_path)
        lines = result.stderr.strip().splitlines()
        assert result.code == 1 and len(lines) == 1, result.stderr
        assert lines[0].startswith("sweeper.slurm: error: squeue did not answer (fetch_config: DNS SRV lookup failed)")
