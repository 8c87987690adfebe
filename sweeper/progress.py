"""Progress of a sweep as plain log lines: starts, finishes, failures (as they happen) and periodic status.

    progress = Progress(total=12)
    progress.started(run, slot); progress.ended(run, status); progress.tick(running)  # every few seconds
"""
from __future__ import annotations

import sys
import time

from train.atomic import read_json


def last_metrics(run_dir) -> dict:
    """The last complete line of a run's metrics.jsonl (cheap: reads the file's tail)."""
    import json

    try:
        with open(run_dir / "metrics.jsonl", "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


class Progress:
    def __init__(self, total: int, stream=None, interval_s: float = 15.0):
        self.total, self.stream, self.interval_s = total, stream or sys.stdout, interval_s
        self.counts = {"finished": 0, "failed": 0, "diverged": 0, "interrupted": 0, "skipped": 0}
        self.t0 = time.time()
        self._last_tick = self.t0

    def log(self, msg: str) -> None:
        print(f"[sweeper {time.strftime('%H:%M:%S')}] {msg}", file=self.stream, flush=True)

    def skipped(self, run) -> None:
        self.counts["skipped"] += 1
        self.log(f"skip   {run.label} (already finished)")

    def started(self, run, slot) -> None:
        self.log(f"start  {run.label} on {slot.name} (cores {','.join(map(str, slot.cores))}, "
                 f"{slot.threads} thread{'s' if slot.threads > 1 else ''})")

    def ended(self, run, status: dict, wall_s: float) -> None:
        state = status.get("status", "failed")
        self.counts[state] = self.counts.get(state, 0) + 1
        summary = read_json(run.run_dir / "summary.json", {}) or {}
        final = summary.get("final") or {}
        detail = f"val_loss={final['val_loss']:.4f}" if isinstance(final.get("val_loss"), float) else ""
        if state != "finished":
            detail = f"{status.get('error') or ''} (log: {run.run_dir / 'stdout.log'})"
        self.log(f"{state.upper() if state != 'finished' else 'done':<6} {run.label} in {wall_s:.1f}s {detail} "
                 f"[{self.done}/{self.total}]")

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def tick(self, running: list) -> None:
        now = time.time()
        if now - self._last_tick < self.interval_s:
            return
        self._last_tick = now
        parts = []
        for run, slot in running:
            m = last_metrics(run.run_dir)
            steps = run.config["train"]["steps"]
            parts.append(f"{run.label}@{slot.name} step {m.get('step', 0)}/{steps}"
                         + (f" loss {m['train_loss']:.3f}" if "train_loss" in m else ""))
        self.log(f"{self.done}/{self.total} done, {len(running)} running, {now - self.t0:.0f}s elapsed: "
                 + "; ".join(parts))
