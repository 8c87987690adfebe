"""A fake nvidia-smi that replays a real node's recorded outputs (tests/fixtures/nvidia_smi/).

    env = fake_smi_env("dgx_h100")      # PATH and NVIDIA_SMI_FIXTURE for a child process
    def test_x(node): node("dgx_h100")  # the conftest fixture: the same for this process (monkeypatched)
"""
from __future__ import annotations

import os

from tests.helpers.commands import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "nvidia_smi"


def fake_smi_env(node: str) -> dict:
    """Environment that puts the fake nvidia-smi first on PATH, replaying `node`'s recorded outputs."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{FIXTURES}{os.pathsep}{env.get('PATH', '')}"
    env["NVIDIA_SMI_FIXTURE"] = str(FIXTURES / node)
    return env
