"""All determinism settings in one place, applied before any CUDA work.

    flags = set_determinism(True)   # recorded in the checkpoint fingerprint and the run's summary

Deterministic mode: `torch.use_deterministic_algorithms(True)` (an op without a deterministic implementation
raises instead of silently varying), cuBLAS with a fixed workspace (`CUBLAS_WORKSPACE_CONFIG=:4096:8`, read when
CUDA initialises), cuDNN deterministic with autotuning off (`benchmark=True` would override it), the math SDPA
backend only (flash / memory-efficient / cuDNN attention backwards accumulate with atomics), and no TF32.
CPU results also depend on the thread count: the fingerprint records it and a resume with another count is
refused.

`train.deterministic=false` allows the fast paths (cuDNN autotuning, fused SDPA backends, TF32); a resumed
run is then close to, but no longer bitwise equal to, the run that never stopped.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch

CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"
INDUCTOR_ENV = "TORCHINDUCTOR_DETERMINISTIC"    # torch._inductor.config.deterministic, read when inductor imports
DETERMINISTIC_CUBLAS = (":4096:8", ":16:8")


def set_determinism(enabled: bool) -> dict:
    if enabled:
        if os.environ.get(CUBLAS_ENV) not in DETERMINISTIC_CUBLAS:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                warnings.warn(f"set_determinism: CUDA is already initialised, so {CUBLAS_ENV} set now may not "
                              "reach cuBLAS; call set_determinism before any CUDA work", RuntimeWarning,
                              stacklevel=2)
            os.environ[CUBLAS_ENV] = ":4096:8"
    _deterministic_algorithms(enabled)
    torch.backends.cudnn.deterministic = enabled
    torch.backends.cudnn.benchmark = not enabled   # benchmark=True would override deterministic
    torch.backends.cuda.matmul.allow_tf32 = not enabled
    torch.backends.cudnn.allow_tf32 = not enabled
    # Flash / memory-efficient / cuDNN SDPA backwards use atomics; the math backend is deterministic.
    torch.backends.cuda.enable_flash_sdp(not enabled)
    torch.backends.cuda.enable_mem_efficient_sdp(not enabled)
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(not enabled)
    torch.backends.cuda.enable_math_sdp(True)
    return determinism_flags()


def _deterministic_algorithms(enabled: bool) -> None:
    """torch.use_deterministic_algorithms(enabled), without the torch._inductor import it does to set inductor's
    flag (1.6 s of every run's start: dynamo, sympy, triton) while inductor is not loaded: TORCHINDUCTOR_DETERMINISTIC
    gives an inductor imported later (torch.compile) the same setting."""
    if "torch._inductor.config" in sys.modules or not hasattr(torch._C, "_set_deterministic_algorithms"):
        torch.use_deterministic_algorithms(enabled, warn_only=False)
        return
    os.environ[INDUCTOR_ENV] = "1" if enabled else "0"
    torch._C._set_deterministic_algorithms(enabled, warn_only=False)


def determinism_flags() -> dict:
    """The settings that change numerics, as recorded in every checkpoint fingerprint."""
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "sdpa_fused_backends": (torch.backends.cuda.flash_sdp_enabled()
                                or torch.backends.cuda.mem_efficient_sdp_enabled()),
        "cublas_workspace_config": os.environ.get(CUBLAS_ENV),
    }
