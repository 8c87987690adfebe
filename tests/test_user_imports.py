"""A run imports what `python script.py` would, nothing of sweeper's checkout (issue 46): under an editable install
of a copy of the checkout (whose top-level train/ and kernels/ once shadowed a user's), in a user environment
that provides its own installed `kernels` (as Hugging Face's is, for transformers) and `train` packages, every
run (local pool cold and warm, Slurm, the Hydra launcher plugin) and every process a run starts sees the same
sys.path and imports the same files as `python probe.py` in the project folder. Without any install (the
checkout started from its own folder, the project elsewhere) a run gets sweeper and nothing else of ours.

    python -m pytest -q -n 0 tests/test_user_imports.py

The venvs see the system's site-packages as plain folders (tests/test_install.py explains why: no .pth hook of
the test runner's own editable install).
"""
from __future__ import annotations

import importlib.util
import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_install import copy_checkout

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="installing needs setuptools")]

WHAT = """import json, os, sys
import kernels, train, sweeper
seen = {"path": list(dict.fromkeys(sys.path)), "kernels": kernels.__file__, "train": train.__file__,
        "sweeper": os.path.realpath(sweeper.__file__)}
print(json.dumps(seen))
"""
PROBE = """import json, os, subprocess, sys
WHAT = %r
exec(WHAT.replace("print(json.dumps(seen))", ""))
seen["child"] = json.loads(subprocess.run([sys.executable, "-c", WHAT], capture_output=True, text=True,
                                          check=True).stdout)
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "seen.json"), "w") as f:
    json.dump(seen, f)
seed = int(next(a for a in sys.argv if a.startswith("--seed=")).split("=")[1])
print(json.dumps({"val_loss": 1.0 + 0.1 * seed}))
""" % WHAT
EXPERIMENT = """# @package _global_
defaults:
  - override /task: custom
task:
  command: [python, probe.py, --out, "{out_dir}"]
  args: flags
experiment:
  name: imports
  baseline: a
  metric: val_loss
  lower_is_better: true
  variants:
    a: []
"""
APP = """import json, os, subprocess, sys
import hydra

WHAT = %r


@hydra.main(version_base=None, config_path=None, config_name=None)
def main(cfg):
    exec(WHAT.replace("print(json.dumps(seen))", ""), globals())
    seen = globals()["seen"]
    seen["child"] = json.loads(subprocess.run([sys.executable, "-c", WHAT], capture_output=True, text=True,
                                              check=True).stdout)
    with open(os.path.join(os.environ["SEEN_DIR"], f"{cfg.seed}.json"), "w") as f:
        json.dump(seen, f)
    return 1.0 + 0.1 * cfg.seed


if __name__ == "__main__":
    main()
""" % WHAT


def make_venv(root: Path, install: Path | None = None) -> Path:
    """A venv that sees the system's site-packages folders and holds its own `kernels` and `train` packages;
    `install`: a checkout installed editable into it first. First, because the test extras bring Hugging Face's
    real `kernels` distribution into the system's folders, whose setuptools entry point (an egg_info writer in
    `kernels._internals`) every build imports: with the user's own same-named package in front of it, no
    project could be built in this environment at all (ours included), which is not what these tests are about."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True).stdout.strip())
    system = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if os.path.isdir(p)]
    (own / "system_site_folders.pth").write_text("".join(p + "\n" for p in system))
    if install is not None:
        run(Path(sys.executable), "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-build-isolation",
            "--no-index", "-q", "-e", str(install), cwd=root.parent)
    for name in ("kernels", "train"):
        (own / name).mkdir()
        (own / name / "__init__.py").write_text(f"WHO = 'the user environment\\'s {name}'\n")
    return python


def project(root: Path) -> Path:
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "imports.yaml").write_text(EXPERIMENT)
    (root / "probe.py").write_text(PROBE)
    (root / "app.py").write_text(APP)
    (root / "seen").mkdir()
    return root


def user_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "SWEEPER_RUN_DIR")}
    return {**env, "SWEEPER_PROGRESS": "plain", **extra}


def run(python: Path, *args: str, cwd: Path, timeout: float = 600, **extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(python), *args], cwd=cwd, env=user_env(**extra), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def editable(tmp_path_factory):
    """(the venv's python, the checkout copy, the user's project, what `python probe.py` sees there)."""
    root = tmp_path_factory.mktemp("editable")
    src = copy_checkout(root / "src")
    python = make_venv(root / "venv", install=src)
    proj = project(root / "project")
    run(python, "probe.py", "--out", "direct", "--seed=0", cwd=proj)
    return python, src, proj, json.loads((proj / "direct" / "seen.json").read_text())


def assert_same(seen: dict, direct: dict, src: Path, proj: Path) -> None:
    """The run and a process it starts import what `python probe.py` did, from the same sys.path (less the
    project folder, which a run's PYTHONPATH adds on purpose: its processes find the project's modules)."""
    for view, want in ((seen, direct), (seen["child"], direct["child"])):
        assert {k: view[k] for k in ("kernels", "train", "sweeper")} == \
            {k: want[k] for k in ("kernels", "train", "sweeper")}, view
        bare = [[p for p in paths if p not in ("", str(proj))] for paths in (view["path"], want["path"])]
        assert bare[0] == bare[1], bare
    assert "the user environment" in Path(seen["kernels"]).read_text()
    assert not any(Path(p).resolve() == src.resolve() for p in seen["path"] + seen["child"]["path"])


@pytest.mark.parametrize("cold", ["0", "1"], ids=["warm", "cold"])
def test_a_run_on_the_local_pool_imports_what_python_script_py_would(editable, cold):
    python, src, proj, direct = editable
    d = f"local_{cold}"
    run(python, "-m", "sweeper", "--config-dir", "conf", "+experiment=imports", "seeds=0", f"sweeper.dir={d}",
        "launcher.threads_per_run=1", "sweeper.report=false", cwd=proj, SWEEPER_COLD_START=cold)
    seen, = (proj / d).rglob("seen.json")
    assert_same(json.loads(seen.read_text()), direct, src, proj)


def test_a_run_on_slurm_imports_what_python_script_py_would(editable, slurm_cluster):
    python, src, proj, direct = editable
    run(python, "-m", "sweeper", "--config-dir", "conf", "+experiment=imports", "seeds=0", "sweeper.dir=slurm",
        "launcher=slurm", "launcher.cpus_per_task=1", "launcher.gpus_per_node=0", "launcher.poll_s=0.5",
        "sweeper.report=false", cwd=proj)
    seen, = (proj / "slurm").rglob("seen.json")
    assert_same(json.loads(seen.read_text()), direct, src, proj)


def test_a_hydra_job_on_the_plugin_imports_what_the_app_would(editable):
    python, src, proj, _ = editable
    run(python, "app.py", "+seed=0", cwd=proj, SEEN_DIR=str(proj / "seen"))            # the app, plain
    direct = json.loads((proj / "seen" / "0.json").read_text())
    run(python, "app.py", "-m", "+seed=1", "hydra/launcher=sweeper_pool", "hydra.launcher.threads_per_run=1",
        cwd=proj, SEEN_DIR=str(proj / "seen"))
    assert_same(json.loads((proj / "seen" / "1.json").read_text()), direct, src, proj)


def test_a_checkout_that_is_not_installed_gives_its_runs_sweeper_and_nothing_else(tmp_path):
    """`python -m sweeper` in the checkout, the project elsewhere (task.cwd): the runs import sweeper through
    a folder of links (build/import-path: sweeper, hydra_plugins), never the checkout's train/ or kernels/."""
    src = copy_checkout(tmp_path / "src")
    python = make_venv(tmp_path / "venv")
    proj = project(tmp_path / "project")
    run(python, "-m", "sweeper", "--config-dir", str(proj / "conf"), "+experiment=imports", "seeds=0",
        f"task.cwd={proj}", f"sweeper.dir={tmp_path / 'sw'}", "launcher.threads_per_run=1", "sweeper.report=false",
        cwd=src)
    seen = json.loads(next((tmp_path / "sw").rglob("seen.json")).read_text())
    link = src / "build" / "import-path"
    assert seen["sweeper"] == str(src.resolve() / "sweeper" / "__init__.py")
    assert "the user environment" in Path(seen["kernels"]).read_text()
    assert "the user environment" in Path(seen["train"]).read_text()
    assert str(link) in seen["path"] and not any(Path(p).resolve() == src.resolve() for p in seen["path"])
    assert sorted(p.name for p in link.iterdir()) == ["hydra_plugins", "sweeper"]


def test_an_import_error_in_a_run_says_its_cause_and_the_fix(editable, tmp_path):
    python, _, _, _ = editable
    proj = project(tmp_path / "shadow")
    (proj / "kernels").mkdir()
    (proj / "kernels" / "__init__.py").write_text("")           # the project's own folder, found first
    (proj / "probe.py").write_text("from kernels import get_kernel\n")
    proc = subprocess.run([str(python), "-m", "sweeper", "--config-dir", "conf", "+experiment=imports", "seeds=0",
                           "sweeper.dir=sw", "launcher.threads_per_run=1", "sweeper.report=false"], cwd=proj,
                          env=user_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert (f"cannot import name 'get_kernel' from 'kernels' ({proj / 'kernels' / '__init__.py'}) ('kernels' was "
            f"imported from") in proc.stdout + proc.stderr
    assert "shadows the installed package; rename it or take its folder off PYTHONPATH" in proc.stdout + proc.stderr


def test_a_warm_run_of_a_script_in_a_subfolder_imports_that_folders_packages(editable, tmp_path):
    """tools/probe.py next to tools/kernels/: `python tools/probe.py` imports tools/kernels, not the installed
    one, so the slot's warm launcher must not import the installed `kernels` ahead of the run."""
    python, src, _, _ = editable
    proj = project(tmp_path / "sub")
    (proj / "tools").mkdir()
    (proj / "tools" / "probe.py").write_text("import kernels, train\n" + PROBE)    # imports the warm launcher reads
    (proj / "tools" / "kernels").mkdir()
    (proj / "tools" / "kernels" / "__init__.py").write_text("WHO = 'the project tools kernels'\n")
    experiment = proj / "conf" / "experiment" / "imports.yaml"
    experiment.write_text(experiment.read_text().replace("[python, probe.py,", "[python, tools/probe.py,"))
    run(python, "tools/probe.py", "--out", "direct", "--seed=0", cwd=proj)
    direct = json.loads((proj / "direct" / "seen.json").read_text())
    assert direct["kernels"] == str(proj / "tools" / "kernels" / "__init__.py")
    run(python, "-m", "sweeper", "--config-dir", "conf", "+experiment=imports", "seeds=0", "sweeper.dir=sw",
        "launcher.threads_per_run=1", "sweeper.report=false", cwd=proj, SWEEPER_COLD_START="0")
    seen = json.loads(next((proj / "sw").rglob("seen.json")).read_text())
    assert seen["kernels"] == direct["kernels"] and seen["train"] == direct["train"]
