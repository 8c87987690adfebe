"""Checks that could run before launch do: a corpus too short for the model's context or batch, and
train.device=cuda where the local launcher has no GPU, are one line and exit 2 with nothing started."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.train.checks import check_corpus_fits, check_device, split_sizes, visible_gpu_count
from sweeper.train.config import ConfigError, DataConfig, RunConfig
from sweeper.train.corpus import load_corpus

ROOT = Path(__file__).resolve().parent.parent


def sweeper(args: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    e = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "sweeper", "+experiment=rope", "seeds=0", *args], cwd=cwd,
                          env=e, capture_output=True, text=True, timeout=300)


def _corpus(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(("the quick brown fox jumps over the lazy dog. " * (n // 45 + 1))[:n])
    return path


def test_split_sizes_are_the_corpus_loader_s_own(tmp_path):
    for n, fraction in ((1000, 0.1), (4321, 0.25), (1500, 0.001)):
        corpus = load_corpus(DataConfig(kind="text", path=str(_corpus(tmp_path, n)), val_fraction=fraction))
        assert split_sizes(n, fraction) == (len(corpus.train), len(corpus.val))


@pytest.mark.slow
def test_a_validation_split_shorter_than_the_context_is_refused_before_launch(tmp_path):
    path = _corpus(tmp_path, 1200)                   # val split: 120 tokens, context 128 -> every run would fail
    r = sweeper(["data=text", f"data.path={path}", "model.context=128", "train.batch_size=2",
                 f"sweeper.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "validation split holds 120 tokens" in lines[0] and "model.context+1=129" in lines[0]
    assert not (tmp_path / "sweep").exists()


def test_a_training_split_with_fewer_windows_than_a_batch_is_refused(tmp_path):
    cfg = RunConfig.from_dict({"model": {"context": 64}, "train": {"batch_size": 32}})
    with pytest.raises(ConfigError, match=r"training split holds 15 windows .* train.batch_size=32"):
        check_corpus_fits(cfg, 1100)                 # 990 train tokens -> (990 - 1) // 64 = 15 windows
    check_corpus_fits(cfg, 100_000)


@pytest.mark.slow
def test_cuda_without_a_gpu_is_refused_on_the_local_launcher(tmp_path):
    r = sweeper(["train.device=cuda", f"sweeper.dir={tmp_path / 'sweep'}"], cwd=tmp_path, CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "train.device=cuda" in lines[0] and "no GPU" in lines[0]
    assert not (tmp_path / "sweep").exists()


def test_the_device_check_follows_the_launcher():
    cfg = RunConfig.from_dict({"train": {"device": "cuda"}})
    with pytest.raises(ConfigError, match="launcher.cpu_only=true"):
        check_device(cfg, {"name": "local", "cpu_only": True}, environ={"CUDA_VISIBLE_DEVICES": "0"})
    check_device(cfg, {"name": "local", "cpu_only": False}, environ={"CUDA_VISIBLE_DEVICES": "0,1"})
    check_device(cfg, {"name": "slurm"}, environ={"CUDA_VISIBLE_DEVICES": ""})     # the node's GPUs decide
    check_device(RunConfig.from_dict({"train": {"device": "auto"}}), {"name": "local", "cpu_only": True})
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "2, 5"}) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0
