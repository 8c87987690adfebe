"""Helpers for tests that run real `python -m sweeper.train RUN_DIR` processes and compare them bit for bit.

    cfg = tiny_config(seed=1, **{"model.dropout": 0.1})
    run_dir = make_run_dir(tmp_path / "a", cfg)
    proc = start(run_dir, SWEEPER_AUDIT_TRAIL=str(run_dir / "trail.jsonl"))
    assert finish(proc, run_dir) == 0
    assert_bitwise_equal(reference_dir, run_dir)

Every process gets OMP_NUM_THREADS=MKL_NUM_THREADS=1 (CPU float sums depend on the thread count) and an
environment without any audit or fault switch inherited from the caller.
"""
from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sweeper.run.checkpoint import list_checkpoints, read_checkpoint
from sweeper.run.files.rundir import RunDir
from sweeper.train.trail import read_trail

ROOT = Path(__file__).resolve().parents[2]
SWITCHES = ("SWEEPER_AUDIT_TRAIL", "SWEEPER_AUDIT_STOP_AT_STEP", "SWEEPER_AUDIT_KILL_AT_STEP",
            "SWEEPER_FAULT_DROP_RNG_STATE", "SWEEPER_TEST_CKPT_WRITE_DELAY_S")

# The default model architecture (RoPE through kernels.apply_rope), shrunk: ~0.1 s per step on one core.
TINY = {
    "seed": 0,
    "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "context": 32},
    "data": {"kind": "stdlib", "n_files": 8},
    "train": {"steps": 30, "batch_size": 8, "ckpt_interval": 5, "log_interval": 5, "eval_interval": 10,
              "eval_batches": 2, "warmup_steps": 3},
    "health": {"preflight": False},
}


def tiny_config(seed: int = 0, **dotted) -> dict:
    """TINY with `seed` and dotted overrides: tiny_config(**{"model.pos_encoding": "none"})."""
    cfg = copy.deepcopy(TINY)
    cfg["seed"] = seed
    for key, value in dotted.items():
        node = cfg
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg


def small_corpus(path: Path) -> Path:
    """A ~2 KB text corpus: 7 batches of 8 windows of 32 characters per epoch, so 30 steps cross 4 epochs."""
    lines = [f"line {i:02d}: the quick brown fox jumps over {i * i % 97} lazy dogs." for i in range(40)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_run_dir(run_dir: Path, cfg: dict) -> Path:
    RunDir(run_dir).write_config(cfg)
    return run_dir


def train_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def start(run_dir: Path, **env: str) -> subprocess.Popen:
    """`python -m sweeper.train RUN_DIR` in its own process; output appended to RUN_DIR/stdout.log, as the
    launcher does."""
    with open(run_dir / "stdout.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "sweeper.train", str(run_dir)],
            cwd=ROOT,
            env=train_env(**env),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def finish(proc: subprocess.Popen, run_dir: Path, timeout: float = 180) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{run_dir}: still running after {timeout}s; log:\n{log_text(run_dir)[-3000:]}")


def train(run_dir: Path, **env: str) -> int:
    return finish(start(run_dir, **env), run_dir)


def log_text(run_dir: Path) -> str:
    p = run_dir / "stdout.log"
    return p.read_text(errors="replace") if p.exists() else ""


class TrailWatcher:
    """The latest step a running process has recorded in its trail, read incrementally (cheap to poll)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.lines = path, 0, 0

    def steps(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        complete = chunk.rfind(b"\n") + 1  # a line still being written is counted next time
        self.offset += complete
        self.lines += chunk[:complete].count(b"\n")
        return self.lines


def trail_steps(path: Path) -> int:
    """The number of complete trail lines (one per step; replayed steps after a resume count again)."""
    return TrailWatcher(path).steps()


def wait_until(predicate, timeout: float, what: str, poll_s: float = 0.002) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll_s)


def final_state(run_dir: Path) -> dict:
    ckpts = list_checkpoints(run_dir / "ckpt")
    assert ckpts, f"{run_dir}: no checkpoint; log:\n{log_text(run_dir)[-3000:]}"
    return read_checkpoint(ckpts[0])


def differences(a, b, path: str = "") -> list[str]:
    """Paths where two nested states differ bit for bit (tensors, arrays, numbers, containers)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = (
            a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))
        )
        return [] if same else [path]
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return [] if a.dtype == b.dtype and a.tobytes() == b.tobytes() else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}{{keys {sorted(set(a) ^ set(b), key=str)}}}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}[len {len(a)} vs {len(b)}]"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return []  # NaN == NaN for our purposes
    return [] if type(a) is type(b) and a == b else [path]


def comparable_metrics(run_dir: Path) -> list[dict]:
    return [
        {k: v for k, v in r.items() if not (k.endswith("_s") or "per_s" in k or "time" in k)}
        for r in RunDir(run_dir).read_metrics()[0]
    ]


def assert_bitwise_equal(ref_dir: Path, run_dir: Path) -> None:
    """The final checkpoint (model, optimizer, scheduler, data order, every RNG state, loss window), the
    metrics lines and the summary's final losses are identical, bit for bit."""
    a, b = final_state(ref_dir), final_state(run_dir)
    assert a["step"] == b["step"], f"final steps differ: {a['step']} vs {b['step']}"
    bookkeeping = ("fingerprint", "wall_s")          # what the run recorded about itself, not its state
    diff = differences({k: v for k, v in a.items() if k not in bookkeeping},
                       {k: v for k, v in b.items() if k not in bookkeeping})
    assert not diff, f"{run_dir} differs from {ref_dir} at the final step in {diff[:8]} ({len(diff)} in all)"
    ma, mb = comparable_metrics(ref_dir), comparable_metrics(run_dir)
    first = next(((x, y) for x, y in zip(ma, mb) if x != y), (len(ma), len(mb)))
    assert ma == mb, f"metrics.jsonl differ: {first}"
    fa, fb = RunDir(ref_dir).read_summary().final, RunDir(run_dir).read_summary().final
    assert fa == fb, f"summary finals differ: {fa} vs {fb}"


def trail_by_step(path: Path) -> dict[int, dict]:
    return {r["step"]: r["hashes"] for r in read_trail(path)}
