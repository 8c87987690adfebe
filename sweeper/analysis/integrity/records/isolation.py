"""Run isolation: runs must write only into their own run dir. Evidence: each run's RUN_DIR/isolation.json (what
changed in its working folder outside its run dir while it ran, hidden folders included, and the files it read:
sweeper.run.observed.folder_watch), and the task's command (a per-run path, {out_dir} or {run_dir}, in its words or
not). Torch-free; never follows a link out of the sweep dir.

    shared_checkpoint(ev), writes_outside_run_dir(ev)     # the two checks (their findings' names)
    file_events(ev)                                       # path -> what each run did to it (shared_state reads it)
    isolation_coverage("shared_checkpoint")(ev)           # Coverage: how many ended runs recorded isolation.json

Findings:
  shared_checkpoint      a checkpoint-like file outside the run dirs that one run wrote and a later run (started
                         after the writer ended) read, wrote again, or, for a file named like a checkpoint
                         (ckpt, checkpoint, .pt, .pth, .safetensors), found there when it started: runs resumed
                         each other's checkpoints -> `invalid` for the arms of those later runs
  writes_outside_run_dir the project folder changed during the sweep (files listed, with the runs that ran
                         then), and whether the command passes a per-run path at all -> a warning
"""
from __future__ import annotations

import os

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.results import load_manifest
from sweeper.run.files.isolation import IsolationRecord, read_isolation
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.status_values import TERMINAL
from sweeper.run.observed.folder_watch import CHECKPOINT, STRONG

PER_RUN = ("{out_dir}", "{run_dir}")
ENDED = [s.value for s in TERMINAL]
SHOWN = 5


def _inside(sweep_dir: str, rel: str, checked: dict[str, bool]) -> str | None:
    """The run dir `rel` when it lies in the sweep dir with no link on the way (a link is never followed out of
    it), else None; the folders above it are checked once per report (`checked`)."""
    path = sweep_dir
    for part in rel.split("/"):
        if part in ("..", "") or os.sep in part:
            return None
        path = os.path.join(path, part)
        if path not in checked:
            checked[path] = not os.path.islink(path)
        if not checked[path]:
            return None
    return path


def _records(ev: SweepEvidence) -> tuple[list[tuple[str, int, str, IsolationRecord]], dict[str, int]]:
    """(variant, seed, label, record) of every run that recorded one, its run dir inside the sweep dir; and the
    counts the coverage line reports (ended runs, watched, too big to watch, no record)."""
    sweep_dir, checked, out = str(ev.sweep_dir), {}, []
    counts = {"ended": 0, "watched": 0, "unwatched": 0}
    runs = ev.runs
    ended = runs["status"].isin(ENDED).tolist() if len(runs) else []
    for (variant, seed, rel), done in zip(zip(runs["variant"], runs["seed"], runs["run_dir"]), ended) \
            if len(runs) else ():
        counts["ended"] += bool(done)
        path = _inside(sweep_dir, str(rel), checked)
        if path is None:
            continue
        try:
            record = read_isolation(path)
        except UnreadableFile:
            continue
        if record is not None and record.watched:
            counts["watched"] += 1
            out.append((variant, int(seed), f"{variant}/seed_{int(seed)}", record))
        elif record is not None:
            counts["unwatched"] += 1
    return out, counts


WRITTEN = ("created", "modified", "deleted")
Event = tuple[str, str, IsolationRecord, str]          # (variant, run label, its record, what it did to the file)


_READ: list = []                # [(the evidence, its records, their counts)]: the checks read them once


def _read(ev: SweepEvidence) -> tuple[list, dict[str, int]]:
    if not (_READ and _READ[0][0] is ev):
        _READ[:] = [(ev, *_records(ev))]
    return _READ[0][1], _READ[0][2]


def file_events(ev: SweepEvidence) -> tuple[list, dict[str, list[Event]]]:
    """Every run's record, and path -> what each run did to it."""
    records, _ = _read(ev)
    events: dict[str, list[Event]] = {}
    for variant, _, label, rec in records:
        for path, kind, _ in rec.changed:
            events.setdefault(path, []).append((variant, label, rec, kind))
    return records, events


def shared_checkpoint(ev: SweepEvidence) -> list[Finding]:
    """Runs that loaded a checkpoint another run of the sweep wrote outside its run dir: invalid."""
    records, events = file_events(ev)
    loaded = {p: _loaders(p, e, records) for p, e in events.items() if CHECKPOINT.search(p)}
    loaded = {p: who for p, who in loaded.items() if who}
    if not loaded:
        return []
    labels = list(dict.fromkeys(label for who in loaded.values() for _, label in who))
    arms = list(dict.fromkeys(v for who in loaded.values() for v, _ in who))
    baseline = ev.experiment.baseline
    if baseline in arms:                             # the baseline's numbers are not its own: every comparison
        arms = [baseline] + [v for v in ev.experiment.variants if v != baseline]
    files = [f"{p} (written by {_who([e for e in events[p] if e[3] in WRITTEN])})" for p in loaded]
    return [Finding(
        "shared_checkpoint", tuple(arms),
        f"{'; '.join(files[:SHOWN])}{' ...' if len(files) > SHOWN else ''}; "
        f"{', '.join(labels[:SHOWN])}{' ...' if len(labels) > SHOWN else ''} started after another run wrote it",
        "runs resumed each other's checkpoints: they use a fixed path outside their run dir, so a later run "
        "loads what an earlier run left; write checkpoints under the run's own folder ({out_dir} in "
        "task.command, or the run API's run.save_checkpoint)", Effect.INVALID)]


def writes_outside_run_dir(ev: SweepEvidence) -> list[Finding]:
    """Files the runs created, changed or deleted in their working folder outside their run dirs: a warning."""
    records, events = file_events(ev)
    written = {p: [e for e in es if e[3] in WRITTEN] for p, es in events.items()}
    written = {p: es for p, es in written.items() if es}
    if not written:
        return []
    folder = records[0][3].folder
    listed = [f"{p} ({_kinds(w)} during {_who(w)})" for p, w in written.items()]
    if ev.task is None:                  # evidence built without it (the report passes the manifest's)
        manifest = load_manifest(ev.sweep_dir)
        task = (manifest.task or {}) if manifest is not None else {}
    else:
        task = ev.task
    words = " ".join(task.get("command") or [])
    no_path = bool(task.get("command")) and not any(p in words for p in PER_RUN)
    fix = ("the command passes no per-run path: add `--out {out_dir}` (or {run_dir}) to task.command and write "
           "there" if no_path else "write outputs under the run's own folder ({out_dir}, RUN_DIR/out)")
    return [Finding(
        "writes_outside_run_dir", (),
        f"{len(written)} file(s) in {folder}: " + "; ".join(listed[:SHOWN]) + (" ..." if len(listed) > SHOWN else ""),
        f"runs wrote outside their run dirs (the project folder changed during the sweep): runs can overwrite or "
        f"read each other's files; {fix}", Effect.WARN)]


def _loaders(path: str, events: list[Event], records) -> list[tuple[str, str]]:
    """(variant, label) of the runs that started after another run wrote `path` and read it, wrote it again, or
    (a file named like a checkpoint) found it there: what a script resuming from a fixed path does."""
    writes = [(label, rec) for _, label, rec, kind in events if kind in ("created", "modified")]
    deletes = [rec.ended for _, _, rec, kind in events if kind == "deleted"]
    if not writes:
        return []
    touched = {label: kind for _, label, _, kind in events}
    out = []
    for variant, _, label, rec in records:
        after = [w for w_label, w in writes if w_label != label and w.ended <= rec.started]
        if not after:
            continue
        last_write = max(w.ended for w in after)
        present = not any(last_write <= d <= rec.started for d in deletes)
        if touched.get(label) in ("read", "created", "modified") or (present and STRONG.search(path)):
            out.append((variant, label))
    return out


def _kinds(writers) -> str:
    return "/".join(sorted({kind for *_, kind in writers}))


def _who(writers) -> str:
    labels = list(dict.fromkeys(label for _, label, _, _ in writers))
    return ", ".join(labels[:3]) + (f" +{len(labels) - 3}" if len(labels) > 3 else "")


def isolation_coverage(check: str):
    """The coverage function of an isolation check (shared_checkpoint, writes_outside_run_dir, shared_state): how
    many of the ended runs recorded what they changed in their working folder."""
    def coverage(ev: SweepEvidence) -> Coverage:
        _, n = _read(ev)
        big = f"; {n['unwatched']} in a folder too big to watch" if n["unwatched"] else ""
        missing = n["ended"] - n["watched"] - n["unwatched"]
        none = (f"; {missing} recorded nothing (started outside sweeper's run wrappers, or the record is damaged)"
                if missing > 0 else "")
        if not n["watched"]:
            what = (f"none of {n['ended']} ended runs recorded what it changed in the project folder{big}{none}: "
                    f"not checked" if n["ended"] else "no run has ended: not checked")
            return Coverage(check, what, False)
        return Coverage(check, f"{n['watched']} of {n['ended']} ended runs recorded what they changed in the project "
                               f"folder (isolation.json){big}{none}", True)
    coverage.__name__ = f"{check}_coverage"
    return coverage
