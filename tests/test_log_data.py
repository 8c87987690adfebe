"""The data a run writes, through its log (issue 40): the cut of a long log never races the run's own final read
of it, and never takes a metric line with it; a run whose log was cut says so when it reported no metric.

    python -m pytest -q -n 0 tests/test_log_data.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.run.files.logcap import LogMark, cap_log, kept_path, read_since, stopped_group
from tests.helpers.commands import ROOT
from tests.helpers.glue import glue_project, sweep

MiB = 2 ** 20
JUNK = "print(('x' * 99 + '\\n') * (20 * 2**20 // 100), end='', flush=True)\n"     # 20 MiB of output


def junk(n: int) -> bytes:
    return (b"y" * 99 + b"\n") * (n // 100)


@pytest.mark.slow
def test_a_metric_line_between_two_20_mib_stretches_survives_the_log_cap(tmp_path):
    project = glue_project(tmp_path, JUNK + "print(json.dumps({'val_loss': 0.25}), flush=True)\n" + JUNK)
    proc = sweep(project, "seeds=0", "launcher.max_log_mb=1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = project / "sweep" / "runs" / "a" / "seed_0"
    assert json.loads((run / "summary.json").read_text())["final"] == {"val_loss": 0.25}
    assert (run / "stdout.log").stat().st_size < 2 * MiB                       # the cap did cut
    assert b'{"val_loss": 0.25}' in (run / "stdout.kept.log").read_bytes()    # the line, kept aside


@pytest.mark.slow
def test_no_metric_in_a_cut_log_names_the_cut(tmp_path):
    project = glue_project(tmp_path, JUNK)
    proc = sweep(project, "seeds=0", "launcher.max_log_mb=1")
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "finished without the decision metric val_loss" in proc.stderr + proc.stdout
    assert "Its log was cut to launcher.max_log_mb" in proc.stderr + proc.stdout, proc.stderr + proc.stdout


def test_cut_lines_that_look_like_metrics_are_kept_in_order_and_read_back_in_place(tmp_path):
    log = tmp_path / "stdout.log"
    mark = LogMark.now(log)                                   # no log yet: the run's output starts at 0
    log.write_bytes(b"start\n" + junk(3 * MiB) + b'METRICS {"a": 1}\n' + junk(3 * MiB) + b'{"a": 2, "b": 3}\n'
                    + junk(3 * MiB) + b'{"a": 4}\n')
    assert cap_log(log, MiB) > 0
    assert kept_path(log).read_bytes() == b'METRICS {"a": 1}\n{"a": 2, "b": 3}\n'
    text = read_since(log, mark)
    assert text.startswith("start\n") and text.endswith('{"a": 4}\n')
    assert text.index('METRICS {"a": 1}') < text.index('{"a": 2, "b": 3}') < text.index('{"a": 4}')
    assert "bytes of output cut here" in text


def test_a_reader_holds_the_cut_off(tmp_path):
    """While a run reads its log (read_since's shared lock, here held by another process) the cut waits."""
    log = tmp_path / "stdout.log"
    log.write_bytes(junk(4 * MiB))
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(log)!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH)\n"
                               "print('held', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert cap_log(log, MiB) == 0 and log.stat().st_size == 4 * MiB // 100 * 100
    finally:
        holder.kill()
        holder.wait()
    assert cap_log(log, MiB) > 0 and log.stat().st_size < MiB


READER = """
import json, os, sys, time
import sweeper.run.files.logcap as logcap
from sweeper.run.files.logcap import LogMark, read_since


class SlowDisk:                                  # each positional read takes 20 ms: a cut can land between them
    def __getattr__(self, name):
        return getattr(os, name)

    def pread(self, *args):
        time.sleep(0.02)
        return os.pread(*args)


logcap.os = SlowDisk()
log, rounds = sys.argv[1], int(sys.argv[2])
missed = 0
junk = (b"z" * 99 + b"\\n") * (3 * 2**20 // 100)
for i in range(rounds):
    mark = LogMark.now(log)
    with open(log, "ab") as f:                   # the run's output: a metric line in the middle and one at the end
        f.write(junk + json.dumps({"mid": i}).encode() + b"\\n" + junk + json.dumps({"val_loss": i}).encode() + b"\\n")
    text = read_since(log, mark)
    missed += f'"mid": {i}}}' not in text or f'"val_loss": {i}}}' not in text
print(missed, flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["disk", "tmpfs"])
def test_the_runs_final_read_never_races_the_cut(tmp_path, where):
    """A real reader process (the run) appends output and reads it back while this process cuts the log in a
    tight loop, holding the reader's group still for a rewrite where the file system cannot collapse (tmpfs)."""
    folder = tmp_path if where == "disk" else Path("/dev/shm")
    if not folder.is_dir():
        pytest.skip("no /dev/shm")
    log = folder / f"race-{os.getpid()}.log"
    log.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reader = subprocess.Popen([sys.executable, "-c", READER, str(log), "12"], stdout=subprocess.PIPE, text=True,
                              env=env, start_new_session=True)
    cuts = 0
    try:
        while reader.poll() is None:
            cuts += cap_log(log, MiB, pause=stopped_group(reader.pid)) > 0
        assert reader.stdout.read().strip() == "0"            # every round read its own metric line back
        assert cuts >= 3
    finally:
        reader.kill()
        reader.wait()
        log.unlink(missing_ok=True)
        kept_path(log).unlink(missing_ok=True)


def test_a_metric_typo_is_still_told_the_names_the_run_reports(tmp_path):
    """The cut note joins the fix; it never replaces the fix that names the reported metrics."""
    from types import SimpleNamespace

    from sweeper.backends.metric_check import MetricCheck
    from sweeper.run.files.records import Summary
    from sweeper.run.files.rundir import RunDir
    from sweeper.run.files.status_values import Status

    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    rd.write_summary(Summary(status=Status.FINISHED, final={"loss": 1.2}, extra={"reported_by": "command output"}))
    exp = SimpleNamespace(metric="los", secondary_metrics=None)
    problem, _ = MetricCheck(exp).run(rd.path, "a/seed_0")
    assert "set experiment.metric to the name the run reports (loss)" in problem and "cut" not in problem
    rd.log_path.write_bytes(junk(3 * MiB))
    cap_log(rd.log_path, MiB)
    problem, _ = MetricCheck(exp).run(rd.path, "a/seed_0")
    assert "set experiment.metric to the name the run reports (loss)" in problem
    assert "Its log was cut to launcher.max_log_mb" in problem
