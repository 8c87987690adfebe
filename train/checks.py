"""Plan-time checks of the built-in trainer that need the corpus or the machine, not just the config values.

    check_corpus_fits(cfg, n_chars)          # the splits hold a validation window and a batch of training windows
    check_device(cfg, launcher={"name": "local", "cpu_only": False})   # train.device=cuda has a GPU to run on
    check_ranks(cfg, launcher={"ranks_per_run": 2})   # the global batch splits evenly across the run's ranks

All raise ConfigError with one line naming the keys and the fix; validate (the task's validate hook) calls them for
every
planned run, so a sweep that every run would fail at start is refused before anything starts. Pure Python
(no torch, no numpy), and CUDA is never initialised here (GPUs are counted as sweeper.backends.local.slots counts them:
CUDA_VISIBLE_DEVICES if set, else `nvidia-smi -L`). The device check applies to the local launcher only: on
Slurm the GPUs are the allocation's, on the node; a Slurm run asking for CUDA without one fails at its start
with the same message (sweeper.train.loop resolves the device there).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from typing import Any, Mapping

from sweeper.run.files.hashing import stable_hash
from sweeper.train.config import ConfigError, RunConfig
from sweeper.train.corpus import corpus_text


def split_sizes(n_tokens: int, val_fraction: float) -> tuple[int, int]:
    """(train tokens, validation tokens) of a corpus of n_tokens, exactly as train.corpus.load_corpus splits."""
    n_val = max(int(n_tokens * val_fraction), 2)
    return n_tokens - n_val, n_val


def check_corpus_fits(cfg: RunConfig, n_tokens: int) -> None:
    """The validation split must hold one window of model.context+1 tokens; the training split one batch of
    windows (train.batch_size windows of model.context tokens), or every run fails at its first step."""
    n_train, n_val = split_sizes(n_tokens, cfg.data.val_fraction)
    T, B = cfg.model.context, cfg.train.batch_size
    if n_val <= T + 1:
        raise ConfigError(f"the validation split holds {n_val} tokens (data.val_fraction={cfg.data.val_fraction} of "
                          f"{n_tokens}), not more than model.context+1={T + 1}: use a larger corpus or "
                          f"data.val_fraction, or a smaller model.context")
    windows = (n_train - 1) // T
    if windows < B:
        raise ConfigError(f"the training split holds {windows} windows of model.context={T} tokens, fewer than "
                          f"train.batch_size={B}: use a larger corpus, or a smaller train.batch_size or model.context")


def visible_gpu_count(environ: Mapping[str, str] | None = None) -> int:
    """GPUs this machine offers a child, without initialising CUDA (CUDA_VISIBLE_DEVICES, else nvidia-smi -L)."""
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        return len([d for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"])
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU ")) if out.returncode == 0 else 0


def check_device(cfg: RunConfig, launcher: Mapping[str, Any] | None,
                 environ: Mapping[str, str] | None = None) -> None:
    """train.device=cuda on the local launcher needs a GPU slot: a visible GPU and launcher.cpu_only=false."""
    if cfg.train.device != "cuda" or not launcher or launcher.get("name") != "local":
        return
    if launcher.get("cpu_only"):
        raise ConfigError("train.device=cuda with launcher.cpu_only=true: every run would fail at its start; "
                          "use train.device=auto (or cpu), or launcher.cpu_only=false on a machine with a GPU")
    if visible_gpu_count(environ) == 0:
        raise ConfigError("train.device=cuda, but this machine shows no GPU (CUDA_VISIBLE_DEVICES / nvidia-smi): "
                          "every run would fail at its start; use train.device=auto (cpu here) or launcher=slurm")


def check_ranks(cfg: RunConfig, launcher: Mapping[str, Any] | None) -> None:
    """A run of N ranks (the launcher's ranks_per_run for this run's variant) trains on N equal shards of the
    global batch (train/parallel.py): train.batch_size must be a multiple of N."""
    ranks = int((launcher or {}).get("ranks_per_run") or 1)
    if cfg.train.batch_size % ranks:
        raise ConfigError(f"train.batch_size={cfg.train.batch_size} is not divisible by ranks_per_run={ranks}: each "
                          f"rank trains on an equal share of the global batch; use a multiple of {ranks}")


def validate(config: Mapping[str, Any], launcher: Mapping[str, Any] | None = None) -> None:
    """The plan-time hook (`sweeper.train.checks:validate`), called with each planned run's resolved config (and the
    sweep's launcher config): a bad value, an unusable corpus (missing, empty, not text, too short for the model's
    context and batch) or train.device=cuda where the local launcher has no GPU raises ConfigError with a
    one-line message (check_corpus_fits, check_device, check_ranks). Each distinct corpus is read once per process (a
    text file again only when
    it changed on disk)."""
    cfg = RunConfig.from_dict(config)
    data = cfg.data
    key = stable_hash([dataclasses.asdict(data), _file_stamp(data.path) if data.kind == "text" else None])
    if key not in _CORPUS_LENGTHS:
        _CORPUS_LENGTHS[key] = len(corpus_text(data)[0])    # characters = tokens of the character-level corpus
    check_corpus_fits(cfg, _CORPUS_LENGTHS[key])
    check_device(cfg, launcher)
    check_ranks(cfg, launcher)


_CORPUS_LENGTHS: dict[str, int] = {}


def _file_stamp(path: str | None) -> list | None:
    try:
        st = os.stat(os.path.expanduser(path)) if path else None
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size] if st else None
