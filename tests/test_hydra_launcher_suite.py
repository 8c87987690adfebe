"""Hydra's own launcher test suite (hydra.test_utils.launcher_common_tests, shipped in hydra-core) against
`hydra/launcher=sweeper_pool`, as hydra-joblib-launcher and hydra-submitit-launcher run it on themselves: every
test it contains passes (a launcher Hydra's users can switch to without changing what their multiruns do).
test_to_absolute_path_multirun launches a second multirun into the same folder with another app: a finished job
is skipped only when both its config and its task are the same (hydra_plugins/sweeper_pool/_contract.py).

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_hydra_launcher_suite.py
"""
import os

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import BatchedSweeperTestSuite, IntegrationTestSuite, LauncherTestSuite

from hydra_plugins.sweeper_pool.sweeper_pool_launcher import SweeperPoolLauncher
from tests.helpers.commands import ROOT

pytestmark = pytest.mark.slow      # every test launches Hydra multiruns (the integration ones in subprocesses)


@pytest.fixture(autouse=True)
def _plugin_importable(monkeypatch, tmp_path):
    """The integration tests start `python task.py` in a temporary folder: it finds this checkout's plugin. Each
    test runs in its own folder: the suite's jobs write `<task>.log` into the working directory, and two xdist
    workers sharing the repo root would create and delete each other's file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("SWEEPER_PROGRESS", "plain")


def test_discovery() -> None:
    """Hydra's plugin scan finds the launcher."""
    assert SweeperPoolLauncher.__name__ in [x.__name__ for x in Plugins.instance().discover(Launcher)]


@pytest.mark.parametrize("launcher_name, overrides", [("sweeper_pool", [])])
class TestSweeperPoolLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize("launcher_name, overrides", [("sweeper_pool", ["hydra.sweeper.max_batch_size=2"])])
class TestSweeperPoolLauncherBatched(BatchedSweeperTestSuite):
    """Hydra's sweeper launching in batches (hydra.sweeper.max_batch_size): one manifest over the batches."""


@pytest.mark.parametrize("task_launcher_cfg, extra_flags", [({}, ["-m", "hydra/launcher=sweeper_pool"])])
class TestSweeperPoolLauncherIntegration(IntegrationTestSuite):
    pass
