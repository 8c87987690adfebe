"""The files of reused runs, brought into the new sweep under its lock: copied, checkpoints hard-linked (never
moved: the earlier sweep stays whole and reportable), the run's records renamed to this sweep's run id.

    done = link_reused(plan)       # run labels now finished here; SWEEP_DIR/reused.json records source and key

Each run is built in a hidden folder beside its run dir and swapped in at the end: a reuse cut short leaves the
run pending (it trains, or is reused by the next launch), never half copied. Files that are written in place
(metrics, logs, the user's outputs) are copied, so a later write in either sweep never reaches the other;
checkpoints (always replaced by rename, never written in place) are hard-linked where the file system allows.
Links inside a run dir are not followed nor copied. A source that is no longer finished is not reused (the run
trains).
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from sweeper.plan.make import Plan, RunSpec
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import KEEP
from sweeper.store.record import ReusedEntry, record_reused

LINKED = ("ckpt",)          # top folders of a run dir whose files are hard-linked, not copied


def link_reused(plan: Plan) -> list[str]:
    """Bring every run of plan.reused that is not finished here into the sweep; labels of the runs reused (a
    source gone or no longer finished is dropped from plan.reused: that run trains)."""
    by_id = {r.run_id: r for r in plan.runs}
    done, entries = [], {}
    for run_id, reused in list(plan.reused.items()):
        run = by_id[run_id]
        if _finished(run.rundir):
            continue
        if not _finished(RunDir(reused.source)):
            del plan.reused[run_id]
            continue
        _bring(run, reused.source, plan.experiment.name)
        entries[run_id] = ReusedEntry(str(reused.source), reused.key)
        done.append(run.label)
    record_reused(plan.sweep_dir, entries)
    return done


def _finished(rd: RunDir) -> bool:
    try:
        status, summary = rd.read_status(), rd.read_summary()
    except UnreadableFile:
        return False
    return status.status in KEEP and summary is not None and summary.status in KEEP


def copy_run(source: Path, target: Path) -> tuple[int, int]:
    """Copy the regular files of `source` into `target` (LINKED folders hard-linked); (bytes copied, linked)."""
    copied = linked = 0
    for here, dirs, files in os.walk(source):                # followlinks=False: a link to a folder is skipped
        rel = Path(here).relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        dirs[:] = [d for d in dirs if not (Path(here) / d).is_symlink()]
        for name in files:
            src, dst = Path(here) / name, target / rel / name
            info = os.lstat(src)
            if not stat.S_ISREG(info.st_mode):               # a link, a socket: never followed, never copied
                continue
            if rel.parts[:1] and rel.parts[0] in LINKED:
                try:
                    os.link(src, dst, follow_symlinks=False)
                    linked += info.st_size
                    continue
                except OSError:                              # another file system, no hard links: a copy
                    pass
            shutil.copyfile(src, dst, follow_symlinks=False)
            copied += info.st_size
    return copied, linked


def _bring(run: RunSpec, source: Path, experiment: str) -> None:
    """Build the run in a hidden folder beside its run dir, rename its records to this run, swap it in."""
    target = run.run_dir
    build = target.parent / f".{target.name}.reuse-{os.getpid()}"
    trash = target.parent / f".{target.name}.old-{os.getpid()}"
    for leftover in (build, trash):
        shutil.rmtree(leftover, ignore_errors=True)
    copy_run(source, build)
    rd = RunDir(build)
    summary = rd.read_summary()
    summary.run_id, summary.variant, summary.experiment, summary.seed = run.run_id, run.variant, experiment, run.seed
    rd.write_summary(summary)
    rd.write_config(run.config)
    rd.update_status(run_id=run.run_id, variant=run.variant, experiment=experiment, seed=run.seed)
    if target.exists():
        os.rename(target, trash)
    os.rename(build, target)
    shutil.rmtree(trash, ignore_errors=True)
