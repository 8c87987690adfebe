"""A tiny project for incremental sweeps (issue 47): the run-API numpy regression of
tests/helpers/integrity_evidence_projects.py importing a project module, swept into ./sweeps (default sweep dirs,
so that an added variant is a new sweep beside the first).

    project = reuse_project(tmp_path)                  # variants base, wide; helpers_np.py imported by every run
    add_variant(project, "narrow", ["width=2"])        # the experiment file gains a variant
    proc = sweep(project, "seeds=0-1")                 # python -m sweeper --config-dir conf +experiment=tiny ...
    finals(sweep_dir)                                  # {"base/seed_0": {...final...}, ...}
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers.integrity_evidence_projects import make_project, user_env

HELPER = "SCALE = 1.0\n"


def reuse_project(root: Path) -> Path:
    project = make_project(root, "api", extra="import helpers_np\nw = w * helpers_np.SCALE")
    (project / "helpers_np.py").write_text(HELPER)
    return project


def add_variant(project: Path, name: str, overrides: list[str] | None) -> None:
    """Add (or, with None, remove) a variant of the experiment file."""
    path = project / "conf" / "experiment" / "tiny.yaml"
    conf = yaml.safe_load(path.read_text())
    if overrides is None:
        conf["experiment"]["variants"].pop(name)
    else:
        conf["experiment"]["variants"][name] = overrides
    path.write_text("# @package _global_\n" + yaml.safe_dump(conf))


def sweep(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    local = [] if "launcher=slurm" in args else ["launcher.threads_per_run=1"]   # a key of the local launcher
    proc = subprocess.run([sys.executable, "-m", "sweeper", "--config-dir", "conf", "+experiment=tiny", *local,
                           "sweeper.journal=off", *args],
                          cwd=project, env=user_env(), capture_output=True, text=True, timeout=timeout)
    proc.cwd = project                  # the closing `sweep dir:` line is relative to it
    return proc


def sweep_dir_of(proc: subprocess.CompletedProcess) -> Path:
    """The sweep dir the closing `sweep dir:` line names (shown as given: relative to the project), absolute."""
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("sweep dir: "))
    return Path(proc.cwd) / line[len("sweep dir: "):]


def finals(sweep_dir: Path) -> dict[str, dict]:
    """Each run's final metrics, as its summary records them (bitwise: JSON floats round-trip)."""
    return {f"{p.parent.parent.name}/{p.parent.name}": json.loads(p.read_text())["final"]
            for p in sorted(sweep_dir.glob("runs/*/seed_*/summary.json"))}


def started(proc: subprocess.CompletedProcess) -> list[str]:
    """The runs the launch started (the local pool's `start` lines)."""
    return [ln.split("start", 1)[1].split()[0] for ln in (proc.stdout + proc.stderr).splitlines() if "] start  " in ln]
