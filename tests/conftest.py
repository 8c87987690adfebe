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


@pytest.fixture(autouse=True)
def _hydra_globals_unchanged():
    """Hydra's ConfigStore and version base are one per process: a primary config a test stores at the store's
    root (an app run in-process stores its "config") would merge into every later composition of that name in the
    pytest worker, and `hydra.main(version_base=None)` sets 1.1 for every later run. Each test starts with the
    version base unset, as in a fresh process (an import-time decoration during collection would set it), and the
    root-level configs it stored are dropped after it (groups stay: Hydra registers its own lazily, once)."""
    from hydra.core.config_store import ConfigStore
    from hydra.version import _UNSPECIFIED_, VersionBase

    VersionBase.instance().version_base = _UNSPECIFIED_
    repo = ConfigStore.instance().repo
    roots = {name for name, node in repo.items() if not isinstance(node, dict)}
    yield
    for name in [name for name, node in repo.items() if not isinstance(node, dict) and name not in roots]:
        del repo[name]


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
