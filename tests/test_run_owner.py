"""Who runs a run (issue 11 item 9): a running run records its process (host, pid, start time, boot id); a reader
tells a live `running` from a stale one (its process gone, or its pid reused) and the next sweeper repairs it."""
import os
import socket
import subprocess
import sys

from sweeper.run.files.owner import alive, process_identity, start_time
from sweeper.run.files.records import Summary
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import LIVE, STALE, UNKNOWN, Status, stale_hint


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_identity_and_liveness_of_processes():
    me = process_identity()
    assert me["host"] == socket.gethostname() and me["pid"] == os.getpid() and me["start"] == start_time(os.getpid())
    assert alive(me) is True
    assert alive({**me, "start": me["start"] + 1}) is False         # the pid now names another process
    assert alive({**me, "pid": dead_pid()}) is False
    assert alive({**me, "boot_id": "another-boot"}) is False         # the machine rebooted since
    assert alive({**me, "host": "some-other-node"}) is None          # cannot be told from here
    assert alive(None) is None and alive({"pid": "12"}) is None


def test_a_stale_running_is_told_apart_and_repaired(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.update_status(Status.RUNNING, owner=process_identity())
    assert rd.liveness() == LIVE and rd.repair_stale() is None and rd.state() is Status.RUNNING
    rd.update_status(owner={**process_identity(), "host": "node7"})
    assert rd.liveness() == UNKNOWN and rd.repair_stale() is None
    rd.update_status(owner=None)
    assert rd.liveness() == UNKNOWN                                  # an older record: no owner
    rd.update_status(owner={**process_identity(), "pid": dead_pid()})
    assert rd.liveness() == STALE
    assert rd.repair_stale() is Status.INTERRUPTED
    record = rd.read_status()
    assert record.status is Status.INTERRUPTED and record.owner is None and rd.liveness() is None
    assert "was gone: the sweeper or the run was killed; resumes from its last checkpoint" in record.error
    # Stale, but its summary says it finished (killed between the two writes): finished.
    rd.update_status(Status.RUNNING, owner={**process_identity(), "pid": dead_pid()})
    rd.write_summary(Summary(status=Status.FINISHED, final={"val_loss": 1.0}))
    assert rd.repair_stale() is Status.FINISHED and rd.state() is Status.FINISHED
    assert stale_hint("sweeps/x").startswith("stale (the sweeper was killed; nothing runs it); resume with "
                                             "`python -m sweeper.resume sweeps/x`")


def test_a_run_records_its_owner_while_it_runs(tmp_path):
    from sweeper.run import init

    run = init(tmp_path / "r", config={"seed": 0, "steps": 1})
    record = run.dir.read_status()
    assert record.status is Status.RUNNING and record.owner == process_identity()
    assert run.dir.liveness() == LIVE
    run.finish(loss=1.0)
    assert run.dir.liveness() is None
