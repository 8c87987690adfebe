"""A run dir's files are never followed out through a symbolic link someone planted (issue 40): every file the
run contract writes or reads, and the log a resumed sweep appends to.

    python -m pytest -q -n 0 tests/test_run_links.py
"""
from __future__ import annotations

import json
import os

import pytest

from sweeper.run.files.atomic import LinkRefused, open_log, read_jsonl, read_tail
from sweeper.run.files.logcap import LogMark, cap_log, read_since
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.records import Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.glue import glue_project, sweep

SECRET = "precious: not sweeper's\n"


@pytest.fixture
def planted(tmp_path):
    """A run dir whose every contract file is a link to a file outside the sweep dir."""
    victim = tmp_path / "victim.txt"
    victim.write_text(SECRET)
    rd = RunDir(tmp_path / "sweep" / "runs" / "a" / "seed_0")
    rd.path.mkdir(parents=True)
    for path in (rd.status_path, rd.summary_path, rd.metrics_path, rd.config_path, rd.env_path, rd.log_path):
        path.symlink_to(victim)
    return rd, victim


def test_no_contract_file_is_written_through_a_planted_link(planted):
    rd, victim = planted
    with pytest.raises(LinkRefused, match="symbolic link .*victim.txt"):
        rd.append_metrics({"step": 1, "loss": 2.0})
    with pytest.raises(LinkRefused):
        open_log(rd.log_path)
    rd.write_summary(Summary(status=Status.FINISHED, final={"val_loss": 1.0}))    # replaces the link by our file
    rd.update_status(Status.RUNNING)
    rd.write_env({"x": 1})
    assert not rd.summary_path.is_symlink() and not rd.status_path.is_symlink()
    assert cap_log(rd.log_path, 1) == 0
    assert victim.read_text() == SECRET


def test_no_contract_file_is_read_through_a_planted_link(planted):
    rd, victim = planted
    victim.write_text(json.dumps({"status": "finished", "final": {"val_loss": 0.1}, "step": 3}) + "\n")
    for read in (rd.read_status, rd.read_summary, rd.read_config):
        with pytest.raises(UnreadableFile, match="symbolic link"):
            read()
    with pytest.raises(LinkRefused):
        rd.metrics_text()
    assert read_jsonl(rd.metrics_path) == [] and read_tail(rd.log_path) == ""
    assert read_since(rd.log_path, LogMark()) == ""


def test_a_fifo_in_place_of_a_file_is_refused_not_waited_on(tmp_path):
    rd = RunDir(tmp_path)
    os.mkfifo(rd.metrics_path)
    with pytest.raises(LinkRefused, match="not a regular file"):
        rd.append_metrics({"step": 1})


@pytest.mark.slow
def test_a_resumed_sweep_never_appends_its_log_through_a_planted_link(tmp_path):
    script = "print(json.dumps({'val_loss': 0.5}))\nsys.exit(0 if os.path.exists('ok') else 1)\n"
    project = glue_project(tmp_path, script)
    assert sweep(project, "seeds=0").returncode == 1                    # failed: the same command runs it again
    run = project / "sweep" / "runs" / "a" / "seed_0"
    victim = tmp_path / "victim.txt"
    victim.write_text(SECRET)
    (run / "stdout.log").unlink()
    (run / "stdout.log").symlink_to(victim)
    (project / "ok").write_text("")
    proc = sweep(project, "seeds=0")
    assert victim.read_text() == SECRET
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert f"{run / 'stdout.log'}: a symbolic link (to {victim})" in line and "remove the link" in line, proc.stderr
