"""State shared between runs through the project folder: a file outside the run dirs (hidden folders such as a
`.cache/` included) that one run wrote and a later run (started after the writer ended) read or wrote again. The
later run's result may then depend on which runs ran before it. Checkpoint-like files are shared_checkpoint's
(sweeper.analysis.integrity.records.isolation); this check names every other file. Evidence: each run's isolation.json
(what it created, modified and read in its working folder, with its start and end: sweeper.run.observed.folder_watch).

    shared_state(ev)        # [Finding]: a warning beside the verdicts of the later runs' arms
"""
from __future__ import annotations

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.records.isolation import SHOWN, Event, file_events
from sweeper.run.observed.folder_watch import CHECKPOINT

USED = {"read": "read", "created": "rewritten", "modified": "rewritten"}


def _later_uses(events: list[Event]) -> list[tuple[str, str, str, str]]:
    """(variant, run label, what it did, the earlier writer's label) for each run that read or wrote again a file
    a run that had ended before it started wrote."""
    writes = [(label, rec) for _, label, rec, kind in events if kind in ("created", "modified")]
    out = []
    for variant, label, rec, kind in events:
        if kind not in USED:
            continue
        earlier = sorted((w.ended, w_label) for w_label, w in writes if w_label != label and w.ended <= rec.started)
        if earlier:
            out.append((variant, label, USED[kind], earlier[-1][1]))
    return out


def shared_state(ev: SweepEvidence) -> list[Finding]:
    _, events = file_events(ev)
    shared = {p: uses for p, es in events.items() if not CHECKPOINT.search(p) and (uses := _later_uses(es))}
    if not shared:
        return []
    arms = list(dict.fromkeys(v for uses in shared.values() for v, *_ in uses))
    baseline = ev.experiment.baseline
    if baseline in arms:                             # the baseline's numbers may hang on other runs: every comparison
        arms = [baseline] + [v for v in ev.experiment.variants if v != baseline]
    listed = []
    for path, uses in shared.items():
        shown = ", ".join(f"{what} by {label} (after {writer})" for _, label, what, writer in uses[:3])
        listed.append(f"{path}: {shown}" + (f" +{len(uses) - 3}" if len(uses) > 3 else ""))
    read = any(what == "read" for uses in shared.values() for _, _, what, _ in uses)
    return [Finding(
        "shared_state", tuple(arms),
        f"{len(shared)} file(s): " + "; ".join(listed[:SHOWN]) + (" ..." if len(listed) > SHOWN else ""),
        f"runs share state through files outside their run dirs: a later run {'read' if read else 'wrote again'} a "
        f"file an earlier run wrote, so its result may depend on which runs ran before it; keep each run's files "
        f"under its own folder ({{out_dir}} in task.command, RUN_DIR/out with the run API), or silence "
        f"shared_state with the reason when the file is a cache every run may share (a download)", Effect.WARN)]
