"""A real (non-editable) install: a wheel built from this checkout, installed into a fresh venv, finds its configs
(the package sweeper.conf) from any directory and runs a user project's sweep from that project's directory.

    python -m pytest -q tests/test_install.py

The venv sees the system site-packages (torch, hydra, ... are not reinstalled) as plain folders on its path, but
none of their .pth hooks run: an editable install of this project there (its finder maps sweeper, sweeper.train,
... to that checkout) would otherwise answer every import the venv's own packages miss and hide what a real
non-editable install does. The tests check that the venv's `sweeper` is the wheel's, or the checkout's where the
command runs in one, and never the editable install's.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.commands import ROOT, TINY

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="building needs setuptools")]
FOLDERS = {"sweeper": "sweeper", "train": "sweeper/train", "kernels": "sweeper/kernels",
           "hydra_plugins": "hydra_plugins"}          # repo folder -> where the wheel puts it
SHIPPED = (*FOLDERS, "conf", "pyproject.toml", "setup.py", "README.md")


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """(the venv's python, the wheel): built from a copy of the checkout (no stale build/ dir), installed
    with pip into a venv that sees the system's site-packages folders (see the module's docstring)."""
    root = tmp_path_factory.mktemp("install")
    src = copy_checkout(root / "src")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(root / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    wheel, = (root / "dist").glob("seed_sweeper-*.whl")      # the distribution's name; the import name is sweeper
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own_site = Path(in_venv(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                            cwd=root).stdout.strip())
    # A path line in a .pth adds the folder to sys.path without running the .pth files inside it (as
    # --system-site-packages would: the editable install's finder among them).
    system = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if os.path.isdir(p)]
    (own_site / "system_site_folders.pth").write_text("".join(p + "\n" for p in system))
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", "--force-reinstall", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python, wheel


def copy_checkout(dest: Path) -> Path:
    """A copy of this checkout's shipped files (what `git clone` gives a newcomer, less the tests)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        kwargs = {"ignore": shutil.ignore_patterns("__pycache__", "*.pyc")} if (ROOT / name).is_dir() else {}
        copy(ROOT / name, dest / name, **kwargs)
    return dest


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
    assert "sweeper/adaptive/calibration.npz" in names                   # the adaptive looks' levels need it
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [ln for ln in zipfile.ZipFile(wheel).read(meta).decode().splitlines() if ln.startswith("Requires-Dist")]
    triton = [ln for ln in requires if ln.split(":", 1)[1].strip().startswith("triton")]
    assert triton and all("extra ==" in ln for ln in triton), triton   # a CPU-only install pulls no triton
    assert any(ln.startswith("Requires-Dist: torch") and "extra" not in ln for ln in requires), requires


LOCKING = """\
import os
def write_egg_lockfile(cmd, basename, filename):      # as Hugging Face's kernels._internals.locking does
    open(os.environ["WRITER_RAN"], "w").write(filename)
"""


def test_a_build_beside_a_kernels_package_with_the_checkout_on_the_path(tmp_path):
    """Hugging Face's `kernels` (transformers 5 installs it) registers an egg_info.writers entry point that
    setuptools imports in every build; with the checkout's root on the build's sys.path (PYTHONPATH here) our
    top-level kernels/ folder used to shadow it: "No module named 'kernels._internals'" (setup.py's docstring).
    A `kernels` distribution with that entry point, then an editable install's metadata step (pip, no isolation:
    the build sees the environment's packages)."""
    src, other = copy_checkout(tmp_path / "src"), tmp_path / "site"
    (other / "kernels" / "_internals").mkdir(parents=True)
    (other / "kernels" / "__init__.py").write_text("")
    (other / "kernels" / "_internals" / "__init__.py").write_text("")
    (other / "kernels" / "_internals" / "locking.py").write_text(LOCKING)
    (other / "kernels-0.19.1.dist-info").mkdir()
    (other / "kernels-0.19.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: kernels\n"
                                                                   "Version: 0.19.1\n")
    (other / "kernels-0.19.1.dist-info" / "entry_points.txt").write_text(
        "[egg_info.writers]\nkernels.lock = kernels._internals.locking:write_egg_lockfile\n")
    env = {**clean_env(), "PYTHONPATH": f"{src}{os.pathsep}{other}", "WRITER_RAN": str(tmp_path / "ran")}
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
                           "--no-build-isolation", "-q", "-e", str(src)], cwd=src, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert Path((tmp_path / "ran").read_text()).name == "kernels.lock"    # the other package's writer ran, not ours


WHERE = """\
import sys
assert not [f for f in sys.meta_path if "Editable" in getattr(f, "__name__", type(f).__name__)], sys.meta_path
import sweeper, sweeper.conf, sweeper.train as train, sweeper.kernels as kernels
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


CHECKOUT_WHERE = "import sweeper, sweeper.train, sweeper.kernels, sweeper.conf as c; " \
                 "print(sweeper.__file__, sweeper.train.__file__, sweeper.kernels.__file__, c.__file__)"


def test_the_readme_command_in_the_checkout_after_a_non_editable_install(install, tmp_path):
    """README's first command (`pip install . && python -m sweeper +experiment=rope seeds=0-3`, a tiny run) and
    the `sweeper` console script, in the checkout's root: its own sweeper/ folder comes first on sys.path there
    (the sweeper's, and each run's, since runs start in the task's folder) and has no train/, kernels/ or conf/
    inside; sweeper/__init__.py maps those three to the checkout's top-level folders (issue 38, item 1)."""
    python, _ = install
    checkout = copy_checkout(tmp_path / "checkout")
    where = in_venv(python, "-c", CHECKOUT_WHERE, cwd=checkout)
    assert where.returncode == 0, where.stderr
    paths = [Path(p) for p in where.stdout.split()]
    assert [p.relative_to(checkout).parts[0] for p in paths] == ["sweeper", "train", "kernels", "conf"], paths
    tiny = ["+experiment=rope", "seeds=0-1", *TINY, "sweeper.journal=off"]
    proc = in_venv(python, "-m", "sweeper", *tiny, "sweeper.dir=sweeps/module", cwd=checkout, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rope beats nope" in proc.stdout or "nope vs rope" in proc.stdout, proc.stdout[-2000:]
    script = python.parent / "sweeper"
    assert script.is_file()
    proc = subprocess.run([str(script), *tiny, "seeds=0", "~experiment.variants.rope_frozen_qk",
                           "sweeper.dir=sweeps/script", "sweeper.reuse=false"], cwd=checkout, env=clean_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from sweeper.run.files.manifest import read_manifest

    for name, runs in (("module", 6), ("script", 2)):
        sweep_dir = checkout / "sweeps" / name
        manifest = read_manifest(sweep_dir)
        assert len(manifest.runs) == runs
        for entry in manifest.runs:
            assert manifest.run_dir(sweep_dir, entry).read_summary().status == "finished", (name, entry)


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
    loss -= 0.01 * random.random()      # a loss that falls (a rising one is named by metric_direction)
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
    from sweeper.run.files.rundir import RunDir
    from sweeper.run.files.status_values import Status

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
