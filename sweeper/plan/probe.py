"""Where the determinism probe runs (sweeper.determinism_probe=true): SWEEP_DIR/probe/<variant>/seed_<k>, one
baseline seed run again after the sweep's runs (sweeper.execute.probe runs it); the report compares it with the
original bitwise (sweeper.analysis.integrity.numbers.determinism). Torch-free, light (the report path reads it).

    probe_dir(sweep_dir, "base", 0)        # the probe's run dir
    probe_dirs(sweep_dir)                  # [(variant, seed, RunDir)] of the probes there

The probe is not a run of the plan: the manifest does not list it, so no table, test or verdict counts it.
"""
from __future__ import annotations

import re
from pathlib import Path

from sweeper.run.files.rundir import RunDir

PROBE = "probe"                   # SWEEP_DIR/probe/<variant>/seed_<k>
_SEED = re.compile(r"^seed_(\d+)$")


def probe_dir(sweep_dir: str | Path, variant: str, seed: int) -> Path:
    return Path(sweep_dir) / PROBE / variant / f"seed_{seed}"


def probe_dirs(sweep_dir: str | Path) -> list[tuple[str, int, RunDir]]:
    """(variant, seed, run dir) of every probe in the sweep dir; a link is never followed out of it."""
    root = Path(sweep_dir) / PROBE
    if not root.is_dir() or root.is_symlink():
        return []
    found = []
    for variant_dir in sorted(root.iterdir()):
        if variant_dir.is_symlink() or not variant_dir.is_dir():
            continue
        for seed_dir in sorted(variant_dir.iterdir()):
            m = _SEED.match(seed_dir.name)
            if m and seed_dir.is_dir() and not seed_dir.is_symlink():
                found.append((variant_dir.name, int(m.group(1)), RunDir(seed_dir)))
    return found
