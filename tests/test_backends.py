"""A new backend is one module and one registry line: a toy `launcher=serial` backend, installed the way a third
party would (a distribution's `sweeper.backends` entry point), runs a real sweep end to end, and its schema types
its keys like the built-in ones; every registered backend implements the one interface.

    python -m pytest -q tests/test_backends.py
"""
from __future__ import annotations

import inspect
import os
import textwrap

import pytest

from sweeper.backends.base import Backend
from sweeper.config.launchers import registered
from sweeper.run.files.manifest import read_manifest
from tests.helpers.commands import ROOT, run_sweeper

FIXTURE = ROOT / "tests" / "fixtures" / "adaptive"     # a task of one tenth of a second per run

# The whole toy backend: the diff a new backend needs is this module and the entry-point line below.
TOY = textwrap.dedent('''
    """launcher=serial: every unfinished run, one after another, as a child process."""
    import os
    import subprocess
    from dataclasses import dataclass

    from sweeper.backends.base import Backend
    from sweeper.config.fields import build
    from sweeper.field_rules import one_of, positive
    from sweeper.run.files.status_values import KEEP


    @dataclass
    class SerialConf:
        name: str = one_of("serial", ("serial",))
        nice: int = positive(1)                 # a key of its own, typed and ranged like the built-in ones

        @classmethod
        def from_dict(cls, d, prefix="launcher"):
            return build(cls, dict(d or {}), prefix)


    class SerialBackend(Backend):
        name = "serial"
        schema = SerialConf

        def launch(self, plan, conf, progress):
            out = {}
            for run in plan.runs:
                if run.rundir.outcome() not in KEEP:
                    subprocess.run(plan.argv(run), cwd=plan.task.cwd, env={**os.environ, **plan.run_env(run)},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                out[run.run_id] = run.rundir.outcome().value
            return out
''')
ENTRY_POINTS = "[sweeper.backends]\nserial = toy_serial:SerialBackend\n"


@pytest.fixture
def toy_backend(tmp_path):
    """A site dir holding the toy module and a distribution whose metadata registers it."""
    site = tmp_path / "site"
    (site / "toy_serial-0.1.dist-info").mkdir(parents=True)
    (site / "toy_serial.py").write_text(TOY)
    (site / "toy_serial-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-serial\n"
                                                                 "Version: 0.1\n")
    (site / "toy_serial-0.1.dist-info" / "entry_points.txt").write_text(ENTRY_POINTS)
    return {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def test_every_registered_backend_implements_the_interface():
    backends = registered()
    assert list(backends)[:2] == ["local", "slurm"]
    for name, cls in backends.items():
        assert issubclass(cls, Backend) and cls.name == name and not inspect.isabstract(cls)
        conf = cls().config({"name": name})
        assert isinstance(conf, cls.schema)


@pytest.mark.slow
def test_a_toy_backend_registered_by_entry_point_runs_a_sweep(toy_backend, tmp_path):
    sweep_dir = tmp_path / "sweep"
    args = ["--config-dir", str(FIXTURE / "conf"), "+experiment=ad", "seeds=0-1", "launcher=serial",
            "launcher.nice=2", f"sweeper.dir={sweep_dir}", "sweeper.journal=off", "sweeper.report=false"]
    proc = run_sweeper(*args, env=toy_backend, cwd=FIXTURE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = read_manifest(sweep_dir)
    assert manifest.launcher == {"name": "serial", "nice": 2}
    assert len(manifest.runs) == 6
    assert all(manifest.run_dir(sweep_dir, e).read_summary().final["loss"] is not None for e in manifest.runs)
    bad = run_sweeper(*args[:-3], "launcher=serial", "launcher.nice=0", env=toy_backend, cwd=FIXTURE)
    assert bad.returncode == 2 and bad.stderr.strip() == "sweeper: error: launcher.nice=0: must be a positive integer"
    unknown = run_sweeper(*args[:4], "launcher.name=mpi", env=toy_backend, cwd=FIXTURE)
    assert unknown.returncode == 2 and "accepted values are local, slurm, serial" in unknown.stderr
