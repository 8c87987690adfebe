"""A stopped, killed or corrupted run, restarted, ends bitwise equal to the run that never stopped.

    python -m pytest -q tests/test_resume.py -s      # -s prints the kill-and-resume trial table

Real `python -m sweeper.train RUN_DIR` processes, SIGKILL/SIGTERM from outside, checkpoints truncated and bit-flipped on
disk. The corpus is small (7 batches per epoch), so 30 steps cross four epoch boundaries and every kill lands
somewhere inside an epoch or right at its end. Kill steps are drawn from SWEEPER_TEST_KILL_SEED (printed).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sweeper.run.checkpoint import (
    FingerprintMismatch,
    check_fingerprint,
    checkpoint_path,
    list_checkpoints,
    load_latest,
    read_checkpoint,
    save_checkpoint,
)
from tests.helpers.train_runs import (
    TrailWatcher,
    assert_bitwise_equal,
    finish,
    log_text,
    make_run_dir,
    small_corpus,
    start,
    tiny_config,
    trail_steps,
    train,
    wait_until,
)

STEPS, CKPT, BATCHES_PER_EPOCH = 30, 5, 7
KILL_SEED = int(os.environ.get("SWEEPER_TEST_KILL_SEED", "4"))
TRIALS: list[dict] = []     # filled by the kill tests, printed at the end of the module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return small_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(scope="module")
def cfg(corpus) -> dict:
    """Complete (every default written out), as a planned run's config is: a refusal names old and new values."""
    from sweeper.train.config import RunConfig

    return RunConfig.from_dict(tiny_config(**{"data.kind": "text", "data.path": str(corpus),
                                              "data.val_fraction": 0.2})).to_dict()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, cfg) -> Path:
    """The uninterrupted run every interrupted one must match."""
    run_dir = make_run_dir(tmp_path_factory.mktemp("reference") / "run", cfg)
    assert train(run_dir) == 0, log_text(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, cfg) -> Path:
    """A run stopped after step 17 through the SIGTERM path: checkpoints step 15 and step 17 (keep 2)."""
    run_dir = make_run_dir(tmp_path_factory.mktemp("stopped") / "run", cfg)
    assert train(run_dir, SWEEPER_AUDIT_STOP_AT_STEP="17") == 75, log_text(run_dir)
    assert [p.name for p in list_checkpoints(run_dir / "ckpt")] == ["step_00000017.pt", "step_00000015.pt"]
    return run_dir


@pytest.fixture(scope="module", autouse=True)
def trial_table():
    yield
    if TRIALS:
        print(f"\nkill-and-resume trials (SWEEPER_TEST_KILL_SEED={KILL_SEED}): {len(TRIALS)}, "
              f"{sum(t['equal'] for t in TRIALS)} bitwise equal")
        for t in TRIALS:
            print(f"  {t['kind']:<22} target {t['target']:>3}  killed after step {t['killed_after']:>3}  "
                  f"resumed from {t['resumed_from']:<18} {'bitwise equal' if t['equal'] else 'DIFFERENT'}")


def _resumed_from(run_dir: Path) -> str:
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary.get("resumed_from") or "(step 0)"


def _kill_trial(reference: Path, cfg: dict, root: Path, kind: str, target: int) -> dict:
    """SIGKILL the run from outside once its trail shows `target` finished steps, restart it, compare."""
    run_dir = make_run_dir(root / f"{kind}-{target}", cfg)
    trail = run_dir / "trail.jsonl"
    proc, watch = start(run_dir, SWEEPER_AUDIT_TRAIL=str(trail)), TrailWatcher(trail)
    wait_until(lambda: watch.steps() >= target or proc.poll() is not None, 120, f"step {target}")
    proc.send_signal(signal.SIGKILL)
    assert finish(proc, run_dir) == -signal.SIGKILL, f"the run ended before the kill at step {target}"
    killed_after = trail_steps(trail)
    assert train(run_dir) == 0, log_text(run_dir)
    trial = {"kind": kind, "target": target, "killed_after": killed_after, "resumed_from": _resumed_from(run_dir)}
    try:
        assert_bitwise_equal(reference, run_dir)
        trial["equal"] = True
    except AssertionError as e:
        trial["equal"], trial["error"] = False, str(e)
    TRIALS.append(trial)
    return trial


@pytest.mark.slow
def test_sigkill_at_random_steps_resumes_bitwise(reference, cfg, tmp_path):
    rng = random.Random(KILL_SEED)
    targets = [("before-first-ckpt", rng.randint(1, CKPT - 1)),
               ("right-after-ckpt", CKPT * rng.randint(2, STEPS // CKPT - 1)),
               ("epoch-end", BATCHES_PER_EPOCH * rng.randint(1, 3))]
    targets += [("mid-epoch", s) for s in rng.sample([s for s in range(CKPT + 1, STEPS - 1)
                                                       if s % BATCHES_PER_EPOCH and s % CKPT], 4)]
    with ThreadPoolExecutor(2) as pool:
        trials = list(pool.map(lambda kt: _kill_trial(reference, cfg, tmp_path, *kt), targets))
    bad = [t for t in trials if not t["equal"]]
    assert not bad, f"kill seed {KILL_SEED}: resumed runs differ: {bad}"
    assert any(t["resumed_from"] != "(step 0)" for t in trials), "no trial resumed from a checkpoint"


@pytest.mark.slow
@pytest.mark.parametrize("step", [10, 30])
def test_sigkill_during_checkpoint_write_falls_back_to_previous(reference, cfg, tmp_path, step):
    """Killed while the temp file of step_{step}.pt is half written (the test-only delay holds it open)."""
    run_dir = make_run_dir(tmp_path / "run", cfg)
    ckpt_dir = run_dir / "ckpt"
    proc = start(run_dir, SWEEPER_TEST_CKPT_WRITE_DELAY_S="1.0")
    tmp_glob = f".step_{step:08d}.pt.*.tmp"
    wait_until(lambda: any(ckpt_dir.glob(tmp_glob)) or proc.poll() is not None, 120, f"{tmp_glob} to appear")
    proc.send_signal(signal.SIGKILL)
    assert finish(proc, run_dir) == -signal.SIGKILL
    assert list(ckpt_dir.glob(tmp_glob)), "the kill should leave the half-written temp file behind"
    assert not checkpoint_path(ckpt_dir, step).exists()
    assert train(run_dir) == 0, log_text(run_dir)
    assert f"resumed from {checkpoint_path(ckpt_dir, step - CKPT)}" in log_text(run_dir)
    assert not list(ckpt_dir.glob(".step_*.tmp")), "stale temp files are cleaned by the next save"
    assert_bitwise_equal(reference, run_dir)
    TRIALS.append({"kind": "during-ckpt-write", "target": step, "killed_after": step,
                   "resumed_from": _resumed_from(run_dir), "equal": True})


@pytest.mark.slow
def test_sigterm_checkpoints_and_resumes_bitwise(reference, cfg, tmp_path):
    run_dir = make_run_dir(tmp_path / "run", cfg)
    trail = run_dir / "trail.jsonl"
    proc, watch = start(run_dir, SWEEPER_AUDIT_TRAIL=str(trail)), TrailWatcher(trail)
    wait_until(lambda: watch.steps() >= 12 or proc.poll() is not None, 120, "step 12")
    proc.send_signal(signal.SIGTERM)
    assert finish(proc, run_dir) == 75, log_text(run_dir)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and status["exit_code"] == 75
    stopped_at = json.loads((run_dir / "summary.json").read_text())["steps"]
    assert 12 <= stopped_at < STEPS and checkpoint_path(run_dir / "ckpt", stopped_at).exists()
    assert train(run_dir, SWEEPER_AUDIT_TRAIL=str(trail)) == 0, log_text(run_dir)
    assert f"at step {stopped_at}" in log_text(run_dir)
    assert_bitwise_equal(reference, run_dir)
    TRIALS.append({"kind": "sigterm", "target": 12, "killed_after": stopped_at,
                   "resumed_from": _resumed_from(run_dir), "equal": True})


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_bit(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[len(blob) * 2 // 3] ^= 0x10
    path.write_bytes(bytes(blob))


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "bit-flipped", "both-corrupt"])
def test_corrupt_checkpoint_falls_back_loudly_and_ends_bitwise(reference, stopped, tmp_path, damage):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir)
    (run_dir / "stdout.log").unlink()
    newest, previous = checkpoint_path(run_dir / "ckpt", 17), checkpoint_path(run_dir / "ckpt", 15)
    (_flip_bit if damage == "bit-flipped" else _truncate)(newest)
    if damage == "both-corrupt":
        _flip_bit(previous)
    assert train(run_dir) == 0, log_text(run_dir)
    log = log_text(run_dir)
    warnings = [line for line in log.splitlines() if line.startswith("WARNING: corrupt checkpoint skipped")]
    assert any("step_00000017.pt" in w for w in warnings), log
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "finished"
    assert any("step_00000017.pt" in w for w in status.get("warnings", [])), status
    assert (run_dir / "ckpt" / "step_00000017.pt.corrupt").exists(), "the corrupt file is kept for inspection"
    if damage == "both-corrupt":
        assert "restarting from step 0" in log and "resumed from" not in log
    else:
        assert f"resumed from {previous} at step 15" in log
    assert_bitwise_equal(reference, run_dir)


def _refusal(stopped: Path, tmp_path: Path, edit=None, **env) -> tuple[int, str, dict]:
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir)
    if edit:
        edit(run_dir)
    rc = train(run_dir, **env)
    return rc, log_text(run_dir), json.loads((run_dir / "status.json").read_text())


@pytest.mark.slow
def test_fingerprint_mismatch_changed_config_refuses_naming_the_key(stopped, tmp_path):
    def lower_lr(run_dir: Path) -> None:
        import yaml

        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        cfg["train"]["lr"] = 0.001
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))

    rc, log, status = _refusal(stopped, tmp_path, lower_lr)
    assert rc == 2
    err = next(line for line in log.splitlines() if line.startswith("sweeper.run: error: refusing to resume"))
    assert "train.lr: 0.003 -> 0.001" in err and "config_hash" in err
    assert f"deleting {tmp_path / 'run' / 'ckpt'}" in err
    assert status["status"] == "failed" and status["exit_code"] == 2 and "train.lr" in status["error"]
    assert len(list_checkpoints(tmp_path / "run" / "ckpt")) == 2, "a refused resume leaves the checkpoints alone"


@pytest.mark.slow
def test_fingerprint_mismatch_thread_count_refuses(stopped, tmp_path):
    rc, log, _ = _refusal(stopped, tmp_path, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    assert rc == 2
    assert "num_threads: 1 -> 2" in log and "start fresh by deleting" in log


@pytest.mark.slow
def test_fingerprint_mismatch_changed_corpus_refuses(stopped, tmp_path, cfg):
    corpus = Path(cfg["data"]["path"])
    original = corpus.read_bytes()
    try:
        corpus.write_bytes(original.replace(b"lazy", b"LAZY"))
        rc, log, _ = _refusal(stopped, tmp_path)
    finally:
        corpus.write_bytes(original)
    assert rc == 2 and "corpus_hash:" in log and "different setup (config" not in log   # config unchanged


# ---- the checkpoint file format in-process (no training needed) ----

def _state(step: int) -> dict:
    import torch

    return {"step": step, "weights": torch.arange(1000, dtype=torch.float32) * step}


def test_keep_k_and_stale_temp_cleanup(tmp_path):
    (tmp_path / ".step_00000003.pt.abc.tmp").write_bytes(b"half")
    for step in (1, 2, 3, 4):
        save_checkpoint(tmp_path, step, _state(step), keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000004.pt", "step_00000003.pt"]
    assert not list(tmp_path.glob("*.tmp"))
    assert read_checkpoint(checkpoint_path(tmp_path, 4))["step"] == 4


def test_load_latest_skips_every_kind_of_damage(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, _state(step), keep=5)
    _flip_bit(checkpoint_path(tmp_path, 3))
    checkpoint_path(tmp_path, 2).write_bytes(b"SWEEPCK1")          # header only
    found = load_latest(tmp_path)
    assert found.state["step"] == 1 and found.path == checkpoint_path(tmp_path, 1)
    assert [p.name for p, _ in found.skipped] == ["step_00000003.pt", "step_00000002.pt"]
    assert "checksum mismatch" in found.skipped[0][1] and "truncated" in found.skipped[1][1]
    assert sorted(p.name for p in tmp_path.glob("*.corrupt")) == ["step_00000002.pt.corrupt",
                                                                  "step_00000003.pt.corrupt"]


def test_check_fingerprint_message_names_every_difference(tmp_path):
    saved = {"config_hash": "aaa", "num_threads": 1, "device": "cpu"}
    with pytest.raises(FingerprintMismatch) as e:
        check_fingerprint(saved, {**saved, "config_hash": "bbb", "num_threads": 4}, tmp_path,
                          {"train": {"lr": 0.003, "steps": 30}}, {"train": {"lr": 0.003, "steps": 60}})
    msg = str(e.value)
    assert "train.steps: 30 -> 60" in msg and "num_threads: 1 -> 4" in msg and "device:" not in msg
    assert str(tmp_path / "ckpt") in msg
    check_fingerprint(saved, dict(saved), tmp_path)   # equal fingerprints pass
