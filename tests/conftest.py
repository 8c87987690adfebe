"""Shared test setup: the Triton interpreter on CPU-only machines, tiny-run overrides, a CLI runner."""
from __future__ import annotations

import os
import warnings

import pytest

from tests.helpers.commands import TINY
from tests.helpers.fake_gpus import fake_smi_env
from tests.helpers.slurm_cluster import cluster_problem

# Triton kernels run in the interpreter when there is no GPU; this must be set before triton is imported.
try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def slurm_cluster() -> None:
    """Skip (with the reason) without a local Slurm cluster; with SWEEPER_REQUIRE_SLURM=1 (CI) fail instead."""
    problem = cluster_problem()
    if problem:
        if os.environ.get("SWEEPER_REQUIRE_SLURM") == "1":
            pytest.fail(f"SWEEPER_REQUIRE_SLURM=1 but no Slurm cluster ({problem})")
        pytest.skip(f"no Slurm cluster ({problem}); start one with `bash tests/slurm/cluster.sh up`")


@pytest.fixture
def tiny() -> list[str]:
    return list(TINY)


@pytest.fixture
def quiet():
    """No warnings from the models a test builds on purpose (broken ones warn). Use with
    `pytestmark = pytest.mark.usefixtures("quiet")`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture(scope="module")
def one_thread():
    """Tiny in-process models: a second OpenMP thread only spins (and crawls when the machine is busy).
    Use with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def node(monkeypatch):
    """node("dgx_h100"): this process sees that node's GPUs through the fake nvidia-smi (tests/helpers/fake_gpus)."""
    def use(name):
        for k, v in fake_smi_env(name).items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return use
