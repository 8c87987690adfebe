"""The run API with ranks, on real `python -m sweeper.train RUN_DIR` processes started as the pool starts ranks
(torchrun's variables, gloo on CPU): a 2-rank run is bitwise reproducible; a stop request that reached one rank
stops both at the same step with one checkpoint holding both ranks' RNG states, and the resumed run ends bitwise
equal to the run that never stopped; a resume at another world size is refused, naming it. Unit checks of the
rank variables and of the fingerprint's new fields against older checkpoints.

Run: ``python -m pytest -q tests/test_resume_ranks.py``
"""
import json
import subprocess
import sys

import pytest

from sweeper.backends.local.ranks import HeldPort, rank_env
from sweeper.run.checkpoint import FingerprintMismatch, check_fingerprint
from sweeper.run.files.rundir import RunDir
from sweeper.run.ranks import Ranks
from tests.helpers.train_runs import ROOT, assert_bitwise_equal, make_run_dir, tiny_config, train_env

pytestmark = pytest.mark.timeout(900)


def launch(run_dir, world: int = 2, **last_rank_env) -> list[int]:
    """The run's ranks, started at once, each with its own log (rank 0: stdout.log); their exit statuses."""
    port = HeldPort()
    procs = []
    for r in range(world):
        env = rank_env(train_env(**(last_rank_env if r == world - 1 else {})), r, world, port.port, [None] * world)
        log = RunDir(run_dir).rank_path(run_dir / "stdout.log", r)
        with open(log, "ab") as out:
            procs.append(subprocess.Popen([sys.executable, "-m", "sweeper.train", str(run_dir)], cwd=ROOT, env=env,
                                          stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    try:
        return [p.wait(timeout=300) for p in procs]
    finally:
        port.close()


@pytest.mark.slow
def test_a_two_rank_run_stopped_by_one_rank_resumes_bitwise(tmp_path):
    cfg = tiny_config(seed=2, **{"train.steps": 16, "model.dropout": 0.1})
    ref, again, stopped = (make_run_dir(tmp_path / n, cfg) for n in ("ref", "again", "stopped"))
    assert launch(ref) == [0, 0]
    assert launch(again) == [0, 0]
    assert_bitwise_equal(ref, again)                          # reproducible, dropout on every rank
    assert launch(stopped, SWEEPER_AUDIT_STOP_AT_STEP="7") == [75, 75]   # rank 1 alone was asked
    st = json.loads((stopped / "status.json").read_text())
    assert st["status"] == "interrupted" and "at step 7" in st["error"]
    assert launch(stopped) == [0, 0]
    assert_bitwise_equal(ref, stopped)


@pytest.mark.slow
def test_one_rank_through_the_data_parallel_path_is_bitwise_the_plain_run(tmp_path):
    """World size 1 with a rendezvous (a gloo group of one: every all-reduce runs) changes no bit."""
    from tests.helpers.train_runs import train

    cfg = tiny_config(seed=4, **{"train.steps": 8})
    plain, ranked = make_run_dir(tmp_path / "plain", cfg), make_run_dir(tmp_path / "ranked", cfg)
    assert train(plain) == 0 and launch(ranked, world=1) == [0]
    summary = RunDir(ranked).read_summary()
    assert summary.extra["distributed"] == {"backend": "gloo", "world_size": 1}
    assert "distributed" not in RunDir(plain).read_summary().extra
    assert_bitwise_equal(plain, ranked)


@pytest.mark.slow
def test_a_resume_at_another_world_size_is_refused_naming_it(tmp_path):
    run_dir = make_run_dir(tmp_path / "r", tiny_config(seed=1, **{"train.steps": 12}))
    assert launch(run_dir, world=1, SWEEPER_AUDIT_STOP_AT_STEP="5") == [75]
    assert launch(run_dir, world=2) == [2, 2]
    st = json.loads((run_dir / "status.json").read_text())
    assert st["status"] == "failed" and "world_size: 1 -> 2" in st["error"], st
    assert "rank 1 of 2 failed: refusing to resume" in (run_dir / "stdout.rank1.log").read_text()


def test_rank_variables():
    assert Ranks.from_env({}) == Ranks(0, 0, 1, 1)
    assert Ranks.from_env({"RANK": "3", "WORLD_SIZE": "4"}) == Ranks(3, 3, 4, 4)
    for bad, says in (({"RANK": "x"}, "RANK='x': expected a non-negative integer"),
                      ({"RANK": "2", "WORLD_SIZE": "2"}, "expected RANK < WORLD_SIZE")):
        with pytest.raises(ValueError, match=says):
            Ranks.from_env(bad)


def test_fingerprints_of_older_checkpoints_are_one_rank_and_an_unknown_device_model_is_not_a_difference(tmp_path):
    old = {"config_hash": "c", "seed": 0}
    check_fingerprint(old, {**old, "world_size": 1, "device_model": "cpu"}, tmp_path)
    with pytest.raises(FingerprintMismatch, match=r"world_size: 1 -> 2"):
        check_fingerprint(old, {**old, "world_size": 2}, tmp_path)
    check_fingerprint({**old, "device_model": "NVIDIA H100 80GB HBM3"}, {**old, "device_model": None}, tmp_path)
    with pytest.raises(FingerprintMismatch, match=r"device_model: 'NVIDIA H100 80GB HBM3' -> 'NVIDIA A100-SXM4-80GB'"):
        check_fingerprint({**old, "device_model": "NVIDIA H100 80GB HBM3"},
                          {**old, "device_model": "NVIDIA A100-SXM4-80GB"}, tmp_path)
