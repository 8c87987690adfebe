"""The public run API (sweeper.run) as user code sees it: config and seed streams, metrics, checkpoints that
restore every RNG state bitwise, stop requests, the final summary, crashes recorded, code without torch, and
TensorBoard event files. Real processes and files; the numbers are checked against independent derivations.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

import sweeper
from sweeper.run import FingerprintMismatch, init
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from tests.helpers.commands import ROOT


def script(tmp_path: Path, body: str, name: str = "user_train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def run_script(path: Path, run_dir: Path, *, env: dict | None = None, timeout: float = 120):
    full = {**os.environ, "SWEEPER_RUN_DIR": str(run_dir), "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, str(path)], cwd=path.parent, env=full, capture_output=True, text=True,
                          timeout=timeout)


def planned_run(tmp_path: Path, config: dict, name: str = "run") -> Path:
    run_dir = tmp_path / name
    RunDir(run_dir).write_config(config)
    RunDir(run_dir).update_status(Status.PENDING, run_id=f"{name}-id", experiment="exp", variant="v1",
                                  seed=config.get("seed"))
    return run_dir


def test_seed_streams_are_the_documented_derivation_and_differ_per_stream(tmp_path):
    run = init(tmp_path / "r", config={"seed": 7, "lr": 0.1})
    expected = int.from_bytes(hashlib.sha256(b"sweeper:7:data_order").digest()[:4], "little")
    assert run.seed_for("data_order") == expected
    assert len({run.seed_for(s) for s in sweeper.run.STREAMS}) == len(sweeper.run.STREAMS)
    assert run.config.lr == 0.1 and run.seed == 7
    with pytest.raises(KeyError, match="unknown seed stream 'datas'"):
        run.seed_for("datas")
    run.close()


def test_every_seed_handed_out_is_32_bits_and_every_common_consumer_takes_it(tmp_path):
    """np.random.seed (numpy's legacy global RNG) refuses 2**32 and above; random.seed and torch.manual_seed
    take it: every stream of many seeds and ranks, as the run API hands them out, goes to all three."""
    import numpy as np
    import torch

    run = init(tmp_path / "r", config={"seed": 0})
    seeds = [sweeper.run.SeedStreams(seed, rank).seed_for(s) for seed in (*range(64), 2**40 + 1) for rank in (0, 1, 3)
             for s in sweeper.run.STREAMS] + [run.seed_for(s) for s in sweeper.run.STREAMS]
    assert all(0 <= s < 2**32 for s in seeds) and max(seeds) >= 2**31     # the whole 32-bit range is used
    before = np.random.get_state(), random.getstate(), torch.get_rng_state()
    try:
        for s in seeds:
            np.random.seed(s), random.seed(s), torch.manual_seed(s)
        run.seed_all()
        assert np.random.get_state()[1][0] == np.random.RandomState(run.seed_for("python")).get_state()[1][0]
    finally:
        np.random.set_state(before[0]), random.setstate(before[1]), torch.set_rng_state(before[2])
    run.close()

def test_identity_comes_from_the_plan_and_the_summary_holds_the_final_metrics(tmp_path):
    run_dir = planned_run(tmp_path, {"seed": 3, "steps": 4})
    run = init(run_dir)
    assert (run.run_id, run.experiment, run.variant, run.seed) == ("run-id", "exp", "v1", 3)
    assert RunDir(run_dir).read_status().status is Status.RUNNING
    for step in (1, 2):
        run.log(step, loss=1.0 / step)
    run.finish(val_loss=0.25)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final"] == {"val_loss": 0.25} and summary["steps"] == 2 and summary["status"] == "finished"
    assert summary["variant"] == "v1" and summary["seed"] == 3
    assert [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()] == \
        [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}]
    again = init(run_dir)                              # a second start of a finished run does nothing
    assert again.finished and again.outcome is Status.FINISHED


RESUMABLE = """
    import random, sys, time
    import numpy as np
    import sweeper

    run = sweeper.init()
    run.seed_all()
    state = run.load_checkpoint() or {"acc": 0.0}
    for step in range(run.start_step, run.config.steps):
        if run.should_stop:
            run.save_checkpoint(state, step)
            sys.exit(run.interrupt(step))
        if step and step % 5 == 0:
            run.save_checkpoint(state, step)
        state["acc"] += random.random() + float(np.random.standard_normal())
        run.log(step + 1, acc=state["acc"], torch_loaded="torch" in sys.modules)
        time.sleep(run.config.sleep)
    run.finish(acc=state["acc"])
"""


@pytest.mark.slow
def test_torch_free_code_is_stopped_and_resumed_bitwise(tmp_path):
    code = script(tmp_path, RESUMABLE)
    ref = planned_run(tmp_path, {"seed": 1, "steps": 30, "sleep": 0.0}, "ref")
    assert run_script(code, ref).returncode == 0
    stopped = planned_run(tmp_path, {"seed": 1, "steps": 30, "sleep": 0.05}, "stopped")
    # the same numbers with a sleep per step: the config differs only in a key that does not touch them
    proc = subprocess.Popen([sys.executable, str(code)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT),
                            "SWEEPER_RUN_DIR": str(stopped)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not list((stopped / "ckpt").glob("step_*.pt")):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 75, proc.stdout.read()
    status = json.loads((stopped / "status.json").read_text())
    assert status["status"] == "interrupted" and "SIGTERM" in status["error"]
    blob = next((stopped / "ckpt").glob("step_*.pt")).read_bytes()
    assert blob[:8] == b"SWEEPCKP"                    # a pickle checkpoint: this code never imported torch
    (stopped / "config.yaml").write_text(yaml.safe_dump({"seed": 1, "steps": 30, "sleep": 0.05}))
    second = run_script(code, stopped)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed from" in second.stdout

    def lines(d):
        return [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines(stopped)] == list(range(1, 31))        # no step twice, none missing
    assert [x["acc"] for x in lines(stopped)] == [x["acc"] for x in lines(ref)]
    assert not any(x["torch_loaded"] for x in lines(stopped))
    assert json.loads((stopped / "summary.json").read_text())["final"] == \
        json.loads((ref / "summary.json").read_text())["final"]


def test_torch_rng_states_come_back_with_the_checkpoint(tmp_path):
    import torch

    run = init(tmp_path / "t", config={"seed": 5})
    run.manual_seed("init")
    torch.rand(3)
    run.save_checkpoint({"w": torch.ones(2)}, 3)
    expected = torch.rand(4)
    run.close()
    torch.manual_seed(999)                             # a fresh process would not be where the run was
    again = init(tmp_path / "t")
    state = again.load_checkpoint()
    assert torch.equal(state["w"], torch.ones(2)) and again.start_step == 3
    assert torch.equal(torch.rand(4), expected)
    again.close()


def test_a_checkpoint_of_another_setup_is_refused_and_named(tmp_path):
    run = init(tmp_path / "f", config={"seed": 0, "lr": 0.1})
    run.save_checkpoint({}, 2, fingerprint={"data_hash": "aaa"})
    run.close()
    again = init(tmp_path / "f", config={"seed": 0, "lr": 0.2})
    with pytest.raises(FingerprintMismatch, match=r"config lr: 0\.1 -> 0\.2"):
        again.load_checkpoint(fingerprint={"data_hash": "aaa"})
    again.close()


def test_a_corrupt_newest_checkpoint_falls_back_and_is_named(tmp_path):
    run = init(tmp_path / "c", config={"seed": 0})
    run.log(4, x=1)
    run.save_checkpoint({"at": 4}, 4)
    run.log(8, x=2)
    path = run.save_checkpoint({"at": 8}, 8)
    run.log(9, x=3)
    run.close()
    path.write_bytes(path.read_bytes()[:100])           # truncated on disk
    again = init(tmp_path / "c")
    assert again.load_checkpoint() == {"at": 4} and again.start_step == 4
    status = json.loads((tmp_path / "c" / "status.json").read_text())
    assert any("step_00000008.pt" in w for w in status["warnings"])
    assert [json.loads(x)["step"] for x in (tmp_path / "c" / "metrics.jsonl").read_text().splitlines()] == [4]
    again.close()


def test_an_uncaught_exception_in_a_script_is_a_failed_run_naming_it(tmp_path):
    code = script(tmp_path, """
        import sweeper
        run = sweeper.init()
        run.log(1, loss=2.0)
        raise ValueError("the data loader broke")
    """)
    run_dir = planned_run(tmp_path, {"seed": 0})
    proc = run_script(code, run_dir)
    assert proc.returncode == 1
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed" and status["error"] == "ValueError: the data loader broke"


@pytest.mark.parametrize("entry, code, status, error", [
    ("user_mod:good", 0, "finished", None),
    ("user_mod:returns_dict", 0, "finished", None),
    ("user_mod:crashes", 1, "failed", "ZeroDivisionError: division by zero"),
    ("user_mod:returns_none", 1, "failed", "returned NoneType without calling run.finish()"),
    ("user_mod:bad_config", 2, "failed", "lr=-1: must be positive"),
    ("user_mod:missing", 2, "failed", "entry point user_mod:missing does not load"),
    ("no_such_mod:main", 2, "failed", "No module named 'no_such_mod'"),
])
def test_the_entry_runner_exit_status_and_recorded_outcome(tmp_path, entry, code, status, error):
    script(tmp_path, """
        import sweeper.run
        def good(run):
            run.finish(val_loss=1.5)
        def returns_dict(run):
            return {"val_loss": 1.5}
        def crashes(run):
            return 1 / 0
        def returns_none(run):
            pass
        def bad_config(run):
            raise sweeper.run.ConfigError("lr=-1: must be positive")
    """, name="user_mod.py")
    run_dir = planned_run(tmp_path, {"seed": 0})
    proc = subprocess.run([sys.executable, "-m", "sweeper.run", entry, str(run_dir)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == code, proc.stdout + proc.stderr
    recorded = json.loads((run_dir / "status.json").read_text())
    assert recorded["status"] == status
    if error:
        assert error in recorded["error"]
    else:
        assert json.loads((run_dir / "summary.json").read_text())["final"] == {"val_loss": 1.5}


def _tfrecords(path: Path) -> list[bytes]:
    """The records of a TensorBoard event file (TFRecord framing: length, crc, data, crc)."""
    data, out, i = path.read_bytes(), [], 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i:i + 8])
        out.append(data[i + 12:i + 12 + n])
        i += 12 + n + 4
    return out


def test_tensorboard_events_are_written_and_tagged_with_the_run(tmp_path):
    from tensorboardX.proto import event_pb2  # the `tensorboard` extra; the `test` extra installs it

    run_dir = planned_run(tmp_path, {"seed": 2})
    run = init(run_dir, tensorboard=True)
    for step in (10, 20):
        run.log(step, train_loss=1.0 / step, note="text is not a scalar")
    run.finish(val_loss=0.1)
    files = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 1 and files[0].name.endswith(".exp.v1.seed2")
    scalars, texts = [], []
    for record in _tfrecords(files[0]):
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value:
            if value.HasField("simple_value"):
                scalars.append((value.tag, event.step, round(value.simple_value, 6)))
            elif value.HasField("tensor"):
                texts.append(b"".join(value.tensor.string_val).decode())
    assert scalars == [("train_loss", 10, 0.1), ("train_loss", 20, 0.05)]
    assert any("experiment=exp variant=v1 seed=2" in t for t in texts)


def test_a_resumed_runs_wall_time_is_the_sum_of_its_segments(tmp_path):
    """wall_time_s counts every segment up to the checkpoint it resumed from, not only the last one (it feeds the
    report's secondary cost table)."""
    run_dir = planned_run(tmp_path, {"seed": 0, "steps": 10})
    t0 = time.time()
    first = init(run_dir)
    time.sleep(0.3)
    first.save_checkpoint({"x": 1}, 5)
    assert first.interrupt(5) == 75
    stopped = json.loads((run_dir / "summary.json").read_text())["wall_time_s"]
    assert 0.3 <= stopped <= time.time() - t0
    time.sleep(0.2)                                   # between segments: not the run's time
    t1 = time.time()
    second = init(run_dir)
    assert second.load_checkpoint() == {"x": 1} and second.start_step == 5
    time.sleep(0.2)
    summary = second.finish(loss=1.0)
    assert summary["wall_time_s"] >= 0.3 + 0.2
    assert summary["wall_time_s"] <= (t1 - t0 - 0.2) + (time.time() - t1)
    assert RunDir(run_dir).read_summary().extra["cost"]["wall_time_s"] == summary["wall_time_s"]
