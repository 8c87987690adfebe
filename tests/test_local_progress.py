import pytest

"""Progress: a live view on a real terminal (a pty), plain lines otherwise; a failure shows when it happens."""
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from types import SimpleNamespace

import yaml

from sweeper.backends.failures import classify
from sweeper.backends.progress import Progress, fmt_s
from tests.helpers.commands import ROOT
from tests.helpers.local_pool import child_env, kill_all_mentioning, sweep_args


@pytest.mark.slow
def test_live_view_on_a_terminal_and_failures_as_they_happen(tmp_path):
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan, write_plan

    d = tmp_path / "sweep"
    args = sweep_args(d, steps=400)
    plan = make_plan(compose_sweep(args), [0])
    write_plan(plan, args)
    broken = next(r for r in plan.runs if r.variant == "nope")
    cfg = json.loads(json.dumps(broken.config))
    cfg["model"]["n_heads"] = 3          # fails validation in the child: exit 2 within a second or two
    (broken.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))

    master, slave = pty.openpty()
    env = child_env()
    env.pop("SWEEPER_PROGRESS")
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *args], cwd=ROOT, env=env, stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:        # EIO: the terminal's other side is closed
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=120)
    finally:
        os.close(master)
        kill_all_mentioning(str(d))
    out = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 1, out
    assert "\x1b[" in out and "\x1b[J" in out                       # the view is redrawn in place
    heads = re.findall(
        r"sweep: (\d+) queued \| (\d+) running \| (\d+) done \| (\d+) failed \| \S+ elapsed \| ETA (\S+)", out
    )
    assert heads and ("0", "1", "0", "1") in {h[:4] for h in heads}, heads  # rope running after nope failed
    rows = re.findall(r"rope/seed_0\s+cpu\d+\s+step\s+(\d+)/400\s+loss (\d+\.\d+)\s+ETA (\S+)", out)
    assert rows and any(int(step) > 0 for step, _, _ in rows)
    assert any(eta != "?" for _, _, eta in rows), rows  # a run ETA once steps progress
    failed_at = out.index("FAILED nope/seed_0")
    assert "config_error: " in out[failed_at : failed_at + 300]
    assert failed_at < out.index("done   rope/seed_0")  # shown when it happened, not at the end


class _Run(SimpleNamespace):
    pass


@pytest.mark.slow
def test_plain_status_lines_with_step_loss_and_eta(tmp_path):
    rd = tmp_path / "run"
    rd.mkdir()
    run = _Run(label="rope/seed_0", run_dir=rd, total_steps=100, log_path=rd / "stdout.log")
    queued = _Run(label="rope/seed_1", run_dir=tmp_path / "other", total_steps=100)
    slot = SimpleNamespace(name="gpu3", cores=(0, 1), threads=2)
    stream = io.StringIO()
    p = Progress(total=3, stream=stream, interval_s=0.0)
    assert not p.live
    p.started(run, slot)
    with open(rd / "metrics.jsonl", "w") as f:
        f.write(json.dumps({"step": 10, "train_loss": 3.5}) + "\n")
    p.tick([(run, slot)], queued=1, force=True)
    time.sleep(1.05)
    with open(rd / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 30, "train_loss": 2.25}) + "\n")
    p.tick([(run, slot)], queued=1, force=True)
    p.ended(queued, {"status": "failed", "error": "killed by SIGKILL", "failure_class": "signal"}, 2.0)
    p.retrying(run, {}, classify(-9), 1, 3, 5.0)
    text = stream.getvalue()
    assert "\x1b" not in text
    lines = text.splitlines()
    assert "start  rope/seed_0 on gpu3 (cores 0,1, 2 threads)" in lines[0]
    status = [line for line in lines if "sweep: 1 queued | 1 running | 0 done | 0 failed" in line]
    assert len(status) == 2 and "step    30/100  loss 2.250" in status[1]
    eta = re.search(r"step\s+30/100\s+loss 2.250\s+ETA (\d+)s", status[1])
    assert eta and 2 <= int(eta.group(1)) <= 6  # 70 steps left at ~20 steps/s
    assert "FAILED rope/seed_1 in 2.0s signal: killed by SIGKILL" in text
    assert "RETRY  rope/seed_0: attempt 1/3 failed (signal: killed by SIGKILL); retrying in 5s" in text


def test_fmt_s():
    assert [fmt_s(x) for x in (None, 4.4, 65, 3725)] == ["?", "4s", "1m05s", "1h02m"]


def test_interrupted_and_not_started_runs_are_not_counted_as_done():
    import io
    from types import SimpleNamespace

    from sweeper.backends.progress import Progress

    out = io.StringIO()
    p = Progress(total=4, stream=out, live=False)
    runs = [SimpleNamespace(label=f"v/seed_{i}", run_dir=None, log_path="x.log") for i in range(4)]
    p.ended(runs[0], {"status": "finished"}, 1.0)
    p.ended(runs[1], {"status": "interrupted", "error": "stopped"}, 1.0)
    p.ended(runs[2], {"status": "failed", "error": "boom"}, 1.0)
    p.not_started(runs[3], {"error": "crash loop"})
    assert p.done == 2 and p.settled == 4
    p.tick([], force=True)
    head = out.getvalue().strip().splitlines()[-1]
    assert "0 queued | 0 running | 1 done | 1 failed | 1 interrupted (resume: run again)" in head
    assert "[1/4]" in out.getvalue() and "[2/4]" in out.getvalue()


def _running_runs(tmp_path, n: int) -> list:
    """n runs running, each with a real run dir holding one metrics line (step 5 of 20)."""
    from sweeper.run.files.rundir import RunDir

    runs = []
    for i in range(n):
        rd = RunDir(tmp_path / f"run_{i}")
        rd.append_metrics({"step": 5, "train_loss": 1.5})
        runs.append(
            (
                SimpleNamespace(label=f"v/seed_{i}", run_dir=rd.path, total_steps=20),
                SimpleNamespace(name=f"cpu{i}", cores=(), threads=1),
            )
        )
    return runs


def test_live_view_with_hundreds_of_runs_fits_the_terminal_and_events_do_not_reread_run_files(tmp_path, monkeypatch):
    from sweeper.run.files.rundir import RunDir

    monkeypatch.setenv("LINES", "30")  # shutil.get_terminal_size reads LINES/COLUMNS first
    monkeypatch.setenv("COLUMNS", "100")
    runs = _running_runs(tmp_path, 300)
    out = io.StringIO()
    progress = Progress(total=1000, stream=out, live=True)
    progress.tick(runs, force=True)
    view = out.getvalue().splitlines()
    assert len(view) == 1 + 26 and view[0].startswith("sweep: 700 queued | 300 running")
    assert view[1].lstrip().startswith("v/seed_0 ") and "step     5/20" in view[1]
    assert view[-1] == "  ... and 275 more running"  # 25 runs named + this line
    for i in (0, 150, 299):  # new lines in the files: an event shows the last view, a tick reads
        RunDir(tmp_path / f"run_{i}").metrics_path.unlink()
    start = out.tell()
    progress.log("done   v/seed_9 in 0.1s")
    event = out.getvalue()[start:]
    assert event.startswith("\x1b[27F\x1b[J[sweeper ") and event.count("\n") == 1 + 27
    assert "step     5/20" in event.splitlines()[2]  # not re-read (the file is gone)
    start = out.tell()
    progress.tick(runs, force=True)
    assert "step     0/20" in out.getvalue()[start:].splitlines()[1]


def test_plain_status_line_names_at_most_plain_rows_runs(tmp_path):
    from sweeper.backends.progress import PLAIN_ROWS

    out = io.StringIO()
    progress = Progress(total=500, stream=out, live=False, interval_s=0.0)
    progress.tick(_running_runs(tmp_path, 200), force=True)
    line = out.getvalue().strip()
    assert line.count("v/seed_") == PLAIN_ROWS - 1 and line.endswith("... and 181 more running")


def test_a_stalled_run_is_named_once_in_the_log_and_marked_in_the_status_until_it_moves(tmp_path):
    """issue 32.5: what sweeper.backends.local.watch reports reaches the log and the live/plain status view."""
    rd = tmp_path / "run"
    rd.mkdir()
    run = _Run(label="rope/seed_0", run_dir=rd, total_steps=100, log_path=rd / "stdout.log")
    slot = SimpleNamespace(name="cpu0", cores=(0,), threads=1)
    stream = io.StringIO()
    p = Progress(total=1, stream=stream, interval_s=0.0)
    p.started(run, slot)
    p.stalled(run, 45.0, "process 123 is stopped (SIGSTOP or SIGTSTP): `kill -CONT 123` resumes it; nothing is killed")
    p.tick([(run, slot)], queued=0, force=True)
    text = stream.getvalue()
    assert "STALL  rope/seed_0: no new output, metrics or CPU time for 45s; process 123 is stopped" in text
    status = [line for line in text.splitlines() if "sweep: 0 queued | 1 running | 1 stalled |" in line]
    assert len(status) == 1 and "STALLED 45s" in status[0]
    p.stall_over(run, 50.0)
    p.tick([(run, slot)], queued=0, force=True)
    after = stream.getvalue()[len(text) :]
    assert "moving rope/seed_0 again after 50s without progress" in after
    assert "STALLED" not in after and "stalled |" not in after
