"""A real (non-editable) install: a wheel built from this checkout, installed into a fresh venv, finds its configs
(the package sweeper.conf) from any directory and runs a user project's sweep from that project's directory.

    python -m pytest -q tests/test_install.py

The venv sees the system site-packages (torch, hydra, ... are not reinstalled), so the test checks that the
venv's `sweeper` is the wheel's and not this checkout (an editable install's finder or PYTHONPATH).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="building needs setuptools")]
FOLDERS = {"sweeper": "sweeper", "train": "sweeper/train", "kernels": "sweeper/kernels",
           "hydra_plugins": "hydra_plugins"}          # repo folder -> where the wheel puts it
SHIPPED = (*FOLDERS, "conf", "pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """(the venv's python, the wheel): built from a copy of the checkout (no stale build/ dir), installed
    with pip into a venv created with --system-site-packages."""
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    for name in SHIPPED:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        kwargs = {"ignore": shutil.ignore_patterns("__pycache__", "*.pyc")} if (ROOT / name).is_dir() else {}
        copy(ROOT / name, src / name, **kwargs)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(root / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    wheel, = (root / "dist").glob("seed_sweeper-*.whl")      # the distribution's name; the import name is sweeper
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "--force-reinstall", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python, wheel


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "SWEEPER_RUN_DIR")}
    return {**env, "SWEEPER_PROGRESS": "plain"}


def in_venv(python: Path, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def test_the_wheel_holds_every_module_and_every_config(install):
    _, wheel = install
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {f"{FOLDERS[folder]}/{p.relative_to(ROOT / folder)}" for folder in FOLDERS
               for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts}
    assert modules and modules <= names, sorted(modules - names)       # pyproject.toml lists every package
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"sweeper", "hydra_plugins"}, tops                   # nothing that shadows a user's train.py
    configs = {str(p.relative_to(ROOT)) for p in (ROOT / "conf").rglob("*.yaml")}
    assert {"conf/sweep.yaml", "conf/task/train.yaml", "conf/experiment/rope.yaml"} <= configs
    assert {f"sweeper/{c}" for c in configs} <= names
    assert not any(n.startswith("conf/") for n in names)               # shipped inside the package only
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [ln for ln in zipfile.ZipFile(wheel).read(meta).decode().splitlines() if ln.startswith("Requires-Dist")]
    triton = [ln for ln in requires if ln.split(":", 1)[1].strip().startswith("triton")]
    assert triton and all("extra ==" in ln for ln in triton), triton   # a CPU-only install pulls no triton
    assert any(ln.startswith("Requires-Dist: torch") and "extra" not in ln for ln in requires), requires


WHERE = """\
import sys, sweeper, sweeper.conf, sweeper.train as train, sweeper.kernels as kernels
from sweeper.config.composition.search import CONF_DIR
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
pool, = [p for p in Plugins.instance().discover(Launcher) if "sweeper_pool" in p.__module__]
print(sweeper.__file__, sweeper.conf.__file__, train.__file__, kernels.__file__, sys.modules[pool.__module__].__file__,
      CONF_DIR)
"""


def test_the_venv_runs_the_wheel_not_the_checkout(install, tmp_path):
    python, _ = install
    proc = in_venv(python, "-c", WHERE, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    site = python.parent.parent / "lib"
    paths = [Path(p) for p in proc.stdout.split()]
    assert len(paths) == 6 and all(p.is_relative_to(site) and not p.is_relative_to(ROOT) for p in paths), paths
    assert paths[5].name == "conf" and (paths[5] / "sweep.yaml").is_file() and paths[5].parent.name == "sweeper"


def test_a_dry_run_from_any_directory(install, tmp_path):
    python, _ = install
    proc = in_venv(python, "-m", "sweeper", "+experiment=rope", "sweeper.dry_run=true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"task: sweeper.train:main (in {tmp_path})" in proc.stdout
    assert "experiment rope: 3 variants x 4 seeds (0-3) = 12 runs" in proc.stdout
    assert list(tmp_path.iterdir()) == []
    bad = in_venv(python, "-m", "sweeper", "+experiment=mine", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown experiment 'mine': available experiments are rope (searched " in bad.stderr
    assert str(python.parent.parent / "lib") in bad.stderr


TOY_EXPERIMENT = """\
# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, toy.py]
experiment:
  name: toy
  baseline: plain
  metric: loss
  lower_is_better: true
  variants:
    plain: []
    worse: [offset=1.0]
offset: 0.0
steps: 5
"""
TOY = """\
import random
import sweeper
run = sweeper.init()
run.seed_all()
print("sweeper from", sweeper.__file__, flush=True)
loss = 1.0 + run.config.offset
for step in range(run.start_step, run.config.steps):
    loss += 0.01 * random.random()
    run.log(step, loss=loss)
run.finish(loss=loss)
"""


def test_a_user_project_sweeps_against_the_installed_sweeper(install, tmp_path):
    python, _ = install
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "toy.yaml").write_text(TOY_EXPERIMENT)
    (tmp_path / "toy.py").write_text(TOY)
    proc = in_venv(python, "-m", "sweeper", "--config-dir", "conf", "+experiment=toy", "seeds=0-3",
                   "launcher.cpu_only=true", "launcher.max_parallel=2", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep_dir, = (p for p in (tmp_path / "sweeps").iterdir() if p.is_dir())
    assert sweep_dir.name in (tmp_path / "sweeps" / "journal.md").read_text()    # the journal sits beside the sweeps
    from sweeper.run.files.manifest import read_manifest
    from sweeper.run.files.rundir import RunDir, Status

    manifest = read_manifest(sweep_dir)
    assert manifest.task["command"] == ["python", "toy.py"] and manifest.task["cwd"] == str(tmp_path)
    assert len(manifest.runs) == 8
    finals = {}
    for entry in manifest.runs:
        rd = manifest.run_dir(sweep_dir, entry)
        summary = rd.read_summary()
        assert summary.status is Status.FINISHED and summary.steps in (4, 5), (entry, summary)
        finals[(entry.variant, entry.seed)] = summary.final["loss"]
        log = rd.log_path.read_text()
        assert f"sweeper from {python.parent.parent / 'lib'}" in log, log
        assert RunDir(rd.path).read_config() == {"seed": entry.seed, "offset": 1.0 if entry.variant == "worse"
                                                 else 0.0, "steps": 5}
    for seed in range(4):         # the same seed draws the same noise: the variants differ by the offset only
        assert finals[("worse", seed)] - finals[("plain", seed)] == pytest.approx(1.0)
    report = (sweep_dir / "report.md").read_text()
    cells = next([c.strip() for c in line.split("|")] for line in report.splitlines() if line.startswith("| worse |"))
    assert cells[2] == "vs plain" and "worse" in cells[3:] and "better" not in cells, cells     # the verdict


def test_a_user_project_sweeps_on_slurm_against_the_installed_sweeper(install, tmp_path, slurm_cluster):
    python, _ = install
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "toy.yaml").write_text(TOY_EXPERIMENT)
    (tmp_path / "toy.py").write_text(TOY)
    proc = in_venv(python, "-m", "sweeper", "--config-dir", "conf", "+experiment=toy", "seeds=0-3",
                   "launcher=slurm", "launcher.cpus_per_task=1", "launcher.gpus_per_node=0", "launcher.poll_s=0.5",
                   cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sweep_dir, = (p for p in (tmp_path / "sweeps").iterdir() if p.is_dir())
    assert sweep_dir.name in (tmp_path / "sweeps" / "journal.md").read_text()    # the journal sits beside the sweeps
    from sweeper.run.files.manifest import read_manifest

    manifest = read_manifest(sweep_dir)
    for entry in manifest.runs:
        rd = manifest.run_dir(sweep_dir, entry)
        assert rd.read_summary().status == "finished"
        log = rd.log_path.read_text()
        assert "Slurm job" in log and f"sweeper from {python.parent.parent / 'lib'}" in log, log
    assert "worse vs plain: WORSE" in proc.stdout, proc.stdout[-2000:]
    assert (sweep_dir / "report.md").exists()
