"""Run isolation: runs must write only into their own run dir. Evidence: each run's RUN_DIR/isolation.json (what
changed in its working folder outside its run dir while it ran: sweeper.run.folder_watch), and the task's command
(a per-run path, {out_dir} or {run_dir}, in its words or not). Torch-free; never follows a link out of the sweep dir.

    findings = check_isolation(ev)

Findings:
  shared_checkpoint      a checkpoint-like file (.pt, .ckpt, .npz, ... or 'ckpt'/'checkpoint' in its path)
                         written by runs one after another: a later run started with an earlier run's file there
                         and wrote it again: runs resumed each other's checkpoints -> `invalid` for their arms
  writes_outside_run_dir the project folder changed during the sweep (files listed, with the runs that ran
                         then), and whether the command passes a per-run path at all -> a warning
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.results import load_manifest
from sweeper.run.files.isolation import IsolationRecord, read_isolation
from sweeper.run.files.rundir import UnreadableFile

CHECKPOINT = re.compile(r"(\.(pt|pth|ckpt|pkl|pickle|npz|npy|safetensors|bin|h5|joblib|msgpack)$|ckpt|checkpoint)",
                        re.IGNORECASE)
PER_RUN = ("{out_dir}", "{run_dir}")
SHOWN = 5


def _records(ev: SweepEvidence) -> list[tuple[str, int, str, IsolationRecord]]:
    """(variant, seed, label, record) of every run that recorded one, its run dir inside the sweep dir."""
    root = os.path.realpath(ev.sweep_dir)
    out = []
    for _, row in ev.runs.iterrows():
        path = Path(ev.sweep_dir) / str(row["run_dir"])
        real = os.path.realpath(path)
        if os.path.commonpath([root, real]) != root:       # a link out of the sweep dir: not followed
            continue
        try:
            record = read_isolation(real)
        except UnreadableFile:
            continue
        if record is not None and record.watched:
            out.append((row["variant"], int(row["seed"]), f"{row['variant']}/seed_{int(row['seed'])}", record))
    return out


def check_isolation(ev: SweepEvidence) -> list[Finding]:
    records = _records(ev)
    writers: dict[str, list[tuple[str, str, IsolationRecord, str]]] = {}
    for variant, _, label, rec in records:
        for path, kind, _ in rec.changed:
            writers.setdefault(path, []).append((variant, label, rec, kind))
    if not writers:
        return []
    out = []
    shared = {p: _after_another(w) for p, w in writers.items() if CHECKPOINT.search(p)}
    shared = {p: later for p, later in shared.items() if later}
    if shared:
        labels = list(dict.fromkeys(label for later in shared.values() for _, label in later))
        arms = tuple(dict.fromkeys(v for later in shared.values() for v, _ in later))
        files = list(shared)
        out.append(Finding(
            "shared_checkpoint", arms,
            f"{', '.join(files[:SHOWN])}{' ...' if len(files) > SHOWN else ''} written by several runs in turn; "
            f"{', '.join(labels[:SHOWN])}{' ...' if len(labels) > SHOWN else ''} started with another run's file there",
            "runs resumed each other's checkpoints: they write a fixed path outside their run dir, so a later run "
            "loads what an earlier run left; write checkpoints under the run's own folder ({out_dir} in "
            "task.command, or the run API's run.save_checkpoint)", Effect.INVALID))
    folder = records[0][3].folder
    listed = [f"{p} ({_kinds(w)} during {_who(w)})" for p, w in writers.items()]
    manifest = load_manifest(ev.sweep_dir)
    task = (manifest.task or {}) if manifest is not None else {}
    words = " ".join(task.get("command") or [])
    no_path = bool(task.get("command")) and not any(p in words for p in PER_RUN)
    fix = ("the command passes no per-run path: add `--out {out_dir}` (or {run_dir}) to task.command and write "
           "there" if no_path else "write outputs under the run's own folder ({out_dir}, RUN_DIR/out)")
    out.append(Finding(
        "writes_outside_run_dir", (),
        f"{len(writers)} file(s) in {folder}: " + "; ".join(listed[:SHOWN]) + (" ..." if len(listed) > SHOWN else ""),
        f"runs wrote outside their run dirs (the project folder changed during the sweep): runs can overwrite or "
        f"read each other's files; {fix}", Effect.WARN))
    return out


def _after_another(writers: list[tuple[str, str, IsolationRecord, str]]) -> list[tuple[str, str]]:
    """(variant, label) of the runs that wrote the file after another run had written it and ended."""
    later = []
    for variant, label, rec, _ in writers:
        if any(other.ended <= rec.started for _, o_label, other, _ in writers if o_label != label):
            later.append((variant, label))
    return later


def _kinds(writers) -> str:
    return "/".join(sorted({kind for *_, kind in writers}))


def _who(writers) -> str:
    labels = list(dict.fromkeys(label for _, label, _, _ in writers))
    return ", ".join(labels[:3]) + (f" +{len(labels) - 3}" if len(labels) > 3 else "")
