"""Reuse at plan time: each planned run's twin among the finished runs of earlier sweeps, or the first identity
input in which the closest earlier run differs. Reads manifests and the candidates' own records; writes nothing.

    reuse = find_reuse(plan)          # Reuse: plan.reused filled (run_id -> Reused), misses (run_id -> why not)
    print(format_reuse(plan, reuse))  # the dry run's lines: which runs would be reused, why the others would not

Where it looks: every sweep dir (a folder holding a manifest) in the folder this plan's sweep dir is in (the
sweeps folder the command writes to) and in each folder of sweeper.reuse_from, this sweep dir aside. A run is
looked up by its config hash in the manifests first (100 sweeps of 1,000 runs: one pass over the manifests); only
its candidates' summaries are read. sweeper.reuse=false trains every run. A run dir that is a link, or that
resolves outside its sweep dir, is never a candidate.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.config.variants.config_diff import describe, diff_configs
from sweeper.errors import UsageError
from sweeper.plan.make import Plan, Reused, RunSpec, task_identity
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.manifest import MANIFEST, ManifestScan
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import KEEP
from sweeper.run.observed.envinfo import numbers_env
from sweeper.run.observed.provenance import project_sources
from sweeper.store.identity import Inputs, first_difference, run_key


@dataclass
class Candidate:
    sweep_dir: Path
    run_dir: Path
    task: str
    ranks: int


@dataclass
class Reuse:
    """What a plan reuses (plan.reused holds the matches) and why each other run trains."""
    misses: dict[str, str] = field(default_factory=dict)       # run_id -> the first input that differs
    searched: list[Path] = field(default_factory=list)         # the earlier sweep dirs looked in
    off: bool = False                                          # sweeper.reuse=false


def store_folders(plan: Plan) -> list[Path]:
    """The folders whose sweep dirs are searched: the plan's sweeps folder, then sweeper.reuse_from's."""
    folders = [plan.sweep_dir.parent]
    for raw in plan.sweep.sweeper.reuse_from or []:
        folder = Path(os.path.expanduser(str(raw))).resolve()
        if not folder.is_dir():
            raise UsageError(f"sweeper.reuse_from: {raw} is not a folder; name folders that hold sweep dirs "
                             f"(e.g. sweeper.reuse_from=[sweeps])")
        folders.append(folder)
    return list(dict.fromkeys(folders))


def earlier_sweeps(folders: list[Path], exclude: Path) -> list[Path]:
    """Sweep dirs in `folders` (a folder itself, or its children, holding a manifest), newest manifest first."""
    found = []
    for folder in folders:
        for child in [folder, *_children(folder)]:
            manifest = child / MANIFEST
            if child != exclude and not child.is_symlink() and manifest.is_file():
                found.append((manifest.stat().st_mtime, child))
    return [d for _, d in sorted(set(found), reverse=True)]


def _children(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _inside(run_dir: Path, sweep_dir: Path) -> bool:
    """The run dir is a real folder of its sweep dir (no link on the way out)."""
    real, root = os.path.realpath(run_dir), os.path.realpath(sweep_dir)
    return not run_dir.is_symlink() and real.startswith(root + os.sep)


def _finished_here(run: RunSpec) -> bool:
    """Read-only: the run already finished (or diverged) in this plan's own sweep dir."""
    try:
        status, summary = run.rundir.read_status(), run.rundir.read_summary()
    except UnreadableFile:
        return False
    return status.status in KEEP and summary is not None and summary.status in KEEP


def find_reuse(plan: Plan) -> Reuse:
    """Fill plan.reused with every planned run an earlier sweep ran with the same identity; the misses say why not."""
    if not plan.sweep.sweeper.reuse:
        return Reuse(off=True)
    todo = [r for r in plan.runs if not (plan.sweep_dir.exists() and _finished_here(r))]
    reuse = Reuse(searched=earlier_sweeps(store_folders(plan), plan.sweep_dir))
    if not todo or not reuse.searched:
        return reuse
    scan = ManifestScan(reuse.searched)                        # each manifest read once, parsed once, on a hit
    by_hash = _candidates(scan, {r.config_hash for r in todo})
    unmatched = {(r.variant, r.seed) for r in todo if r.config_hash not in by_hash}
    by_label = _nearest(scan, unmatched) if unmatched else {}
    threads = plan.launch.threads_per_run
    env = numbers_env(threads=str(threads) if threads is not None else None)
    sources = tuple(project_sources(plan.task.cwd)) if plan.task.command else None
    task = stable_hash(task_identity(plan.task))
    cache: dict = {}
    for run in todo:
        planned = Inputs(task, run.config_hash, plan.ranks_of(run.variant), env, sources=sources)
        why = None
        for cand in by_hash.get(run.config_hash, []):
            stored = _stored(cand)
            if isinstance(stored, str):
                why = why or stored
                continue
            differs = first_difference(planned, stored, plan.task.cwd, cache)
            if differs is None:
                plan.reused[run.run_id] = Reused(source=cand.run_dir, key=run_key(planned))
                break
            why = why or f"{differs} ({_where(cand.run_dir)})"
        else:
            reuse.misses[run.run_id] = why or _config_reason(run, by_label.get((run.variant, run.seed)))
    return reuse


def _candidates(scan: ManifestScan, wanted: set[str]) -> dict[str, list[Candidate]]:
    """config hash -> the earlier runs planned with it. A manifest is parsed only when its bytes hold one of the
    wanted hashes (100 manifests of 1,000 runs: a byte search, not 100 parses)."""
    by_hash: dict[str, list[Candidate]] = {}
    for sweep_dir, manifest in scan.naming(wanted):
        task = stable_hash(task_identity(manifest.task or {}))
        for entry in manifest.runs:
            if entry.config_hash in wanted:
                ranks = int((manifest.resources.get(entry.variant) or {}).get("ranks_per_run", 1))
                by_hash.setdefault(entry.config_hash, []).append(
                    Candidate(sweep_dir, sweep_dir / entry.run_dir, task, ranks))
    return by_hash


def _nearest(scan: ManifestScan, labels: set[tuple]) -> dict[tuple, Path]:
    """(variant, seed) -> the newest earlier run of that variant and seed (to name the config keys that differ)."""
    found: dict[tuple, Path] = {}
    for sweep_dir, manifest in scan.naming({v for v, _ in labels}):
        for entry in manifest.runs:
            if (entry.variant, entry.seed) in labels:
                found.setdefault((entry.variant, entry.seed), sweep_dir / entry.run_dir)
        if len(found) == len(labels):
            break
    return found


def _stored(cand: Candidate) -> Inputs | str:
    """The candidate's recorded inputs, or why it cannot be reused (not finished, no records, a link)."""
    if not _inside(cand.run_dir, cand.sweep_dir):
        return f"{_where(cand.run_dir)} is a link out of its sweep dir"
    rd = RunDir(cand.run_dir)
    try:
        status, summary = rd.read_status(), rd.read_summary()
    except UnreadableFile:
        return f"the earlier run's records cannot be read ({_where(cand.run_dir)})"
    if summary is None or status.status not in KEEP or summary.status not in KEEP:
        return f"the earlier run is {status.status.value}, not finished ({_where(cand.run_dir)})"
    fp = summary.fingerprint
    return Inputs(cand.task, summary.config_hash or "", cand.ranks, fp.get("environment") or {},
                  code=fp.get("code_files") if isinstance(fp.get("code_files"), dict) else None)


def _where(run_dir: Path) -> str:
    return f"{run_dir.parent.parent.parent.name}/{run_dir.parent.name}/{run_dir.name}"


def _config_reason(run: RunSpec, nearest: Path | None) -> str:
    """No earlier run has this config: name the keys that differ from the same variant and seed's, if any ran."""
    if nearest is None:
        return "config: no earlier run has this run config"
    try:
        old = RunDir(nearest).read_config()
    except (UnreadableFile, OSError):
        return "config: no earlier run has this run config"
    return f"config: {describe(diff_configs(old, run.config), limit=3)} ({_where(nearest)})"


def format_reuse(plan: Plan, reuse: Reuse) -> str:
    """The dry run's lines: 'reuse: 8 of 12 runs from sweeps/x (8)', then each run that trains and why."""
    if reuse.off:
        return "reuse: off (sweeper.reuse=false): every run trains"
    if not plan.reused and not reuse.misses:
        return "reuse: no earlier sweep to reuse from" if not reuse.searched else "reuse: nothing left to train"
    lines = [f"reuse: {reused_line(plan)}; {len(reuse.misses)} would train"]
    labels = {r.run_id: r.label for r in plan.runs}
    lines += [f"  train {labels[run_id]}: {why}" for run_id, why in reuse.misses.items()]
    return "\n".join(lines)


def reused_line(plan: Plan) -> str:
    """'8 of 12 runs reused from tiny-3f0c1a2b (8)': how many, and from which sweep dirs."""
    sources: dict[str, int] = {}
    for reused in plan.reused.values():
        name = reused.source.parent.parent.parent.name
        sources[name] = sources.get(name, 0) + 1
    where = ", ".join(f"{name} ({n})" for name, n in sources.items())
    return f"{len(plan.reused)} of {len(plan.runs)} runs reused" + (f" from {where}" if where else "")
