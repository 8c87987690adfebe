"""All determinism settings in one place, applied before any CUDA work.

    flags = set_determinism(True)   # recorded in the checkpoint fingerprint and the run's env.json

With `train.deterministic=false` the fast, nondeterministic paths are allowed (cudnn autotuning, fused SDPA
backends); resume is then no longer bitwise.
"""
from __future__ import annotations

import os

import torch


def set_determinism(enabled: bool) -> dict:
    if enabled:
        # cuBLAS needs a fixed workspace for deterministic GEMMs; must be set before CUDA initialises.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(enabled, warn_only=False)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = not enabled   # benchmark=True would override deterministic
    if torch.cuda.is_available():
        # Flash / memory-efficient SDPA backwards use atomics; the math backend is deterministic.
        torch.backends.cuda.enable_flash_sdp(not enabled)
        torch.backends.cuda.enable_mem_efficient_sdp(not enabled)
        torch.backends.cuda.enable_math_sdp(True)
        torch.backends.cuda.matmul.allow_tf32 = not enabled
        torch.backends.cudnn.allow_tf32 = not enabled
    return determinism_flags()


def determinism_flags() -> dict:
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
