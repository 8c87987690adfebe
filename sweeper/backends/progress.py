"""Progress of a sweep: a live view on a terminal, plain log lines otherwise; failures shown as they happen.

    progress = Progress(total=12)              # live when stdout is a TTY (SWEEPER_PROGRESS=plain|live forces)
    progress.started(run, slot); progress.ended(run, status, wall_s); progress.tick(running, queued=3)
    with progress.ticking():                   # the view moves by itself while this thread blocks (a preflight,
        progress.phase("preflight rope")       # a slot's warm start); the phase shows in the head line

Live view (redrawn about once a second below the event lines):
    sweep: 3 queued | 2 running | 6 done | 1 failed | 1m02s elapsed | ETA 1m40s
      rope/seed_1            cpu0   step   120/300  loss 2.412  ETA 41s
With more runs running than the terminal has lines for, the view shows the first of them and one line
"... and N more running" (it always fits the screen, so it can be erased); run files are read once per redraw (an event
line redraws the last view), so the
cost of a second stays proportional to the runs running, however many events it has.
Plain mode prints the same status as one line every `interval_s` seconds. Inside `ticking()` a daemon thread
redraws (live) or prints (plain) the status when the sweep's own thread has not for a period: the clock and the
counters stay right while that thread waits on something else; every method holds one lock. Runs are anything
with `.label` and `.run_dir` (steps from `.total_steps`); slots anything with `.name`. A run that ends prints
its final metrics, or its status, failure class, error and log. Run files are read through
sweeper.run.files.rundir (health through sweeper.health.result); a file that cannot be read is skipped here
(the report names it).
"""
from __future__ import annotations

import functools
import math
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager

from sweeper.health.result import HealthReport
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status

SHOWN_FINALS = 3          # final metrics printed when a run ends
PLAIN_ROWS = 20           # running runs named on one plain status line (then "... and N more running")


def last_metrics(run_dir) -> dict:
    """The last complete line of a run's metrics (cheap: reads the file's tail)."""
    return RunDir(run_dir).last_metrics() if run_dir is not None else {}


def final_metrics(run_dir) -> dict:
    """The final metrics of the run's summary ({} when there is none or it cannot be read)."""
    try:
        summary = RunDir(run_dir).read_summary() if run_dir is not None else None
    except UnreadableFile:
        return {}
    return summary.final if summary is not None else {}


def _finals_text(final: dict, metric: str | None = None) -> str:
    """A few final metrics, the decision metric first (named even when the run lacks it)."""
    if metric is not None and metric not in final:
        return f"{metric}=(not reported) " + _finals_text(final)
    order = ([metric] if metric else []) + [k for k in final if k != metric]
    shown = [(k, final[k]) for k in order if isinstance(final[k], (int, float)) and not isinstance(final[k], bool)
             or k == metric]
    return " ".join(f"{k}={v:.4f}" if isinstance(v, float) and math.isfinite(v) else f"{k}={v}"
                    for k, v in shown[:SHOWN_FINALS])


def fmt_s(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _total_steps(run) -> int | None:
    steps = getattr(run, "total_steps", None)
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def _locked(method):
    """The method under the Progress' lock (the ticker thread reads what it changes)."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


class Progress:
    def __init__(self, total: int, stream=None, interval_s: float = 15.0, live: bool | None = None,
                 metric: str | None = None, baseline: str | None = None, controls: tuple = ()):
        self.total, self.stream, self.interval_s = total, stream or sys.stdout, interval_s
        self.metric = metric                    # the decision metric: first on each run's "done" line
        self.baseline, self.controls = baseline, tuple(controls)     # for the checks across runs it can make live
        self._finals: dict[tuple[str, int], dict] = {}    # (variant, seed) -> final metrics of a finished run
        self._copies_named: set[tuple[str, str]] = set()  # (check, variant) already named live
        forced = os.environ.get("SWEEPER_PROGRESS", "").lower()
        if live is None:
            live = forced == "live" or (forced != "plain" and _isatty(self.stream))
        self.live = live
        self.counts = {**{s.value: 0 for s in (Status.FINISHED, Status.FAILED, Status.DIVERGED, Status.INTERRUPTED,
                                                Status.PENDING)}, "skipped": 0}
        self.t0 = time.monotonic()
        self._last_tick = 0.0 if live else self.t0
        self._last_observe = 0.0
        self._health: dict[str, dict] = {}      # run label -> health file mtime and the checks already printed
        self._block_lines = 0
        self._seen: dict[str, tuple[float, int]] = {}     # run label -> (time, step) first seen this attempt
        self._durations: list[float] = []
        self._running: list = []
        self._queued: int | None = None
        self._slots = 1
        self._view: tuple[str, list[str]] | None = None   # the last status read from the run files
        self._stalled: dict[str, float] = {}    # run label -> when it last moved (sweeper.backends.local.watch)
        self._phase: tuple[str, float] | None = None   # what the sweep waits on before its runs, since when
        self._lock = threading.RLock()
        self._last_call = time.monotonic()           # the sweep's own last tick (the ticker redraws only when it lags)

    # -- the ticker -------------------------------------------------------------------------------------------
    @contextmanager
    def ticking(self):
        """A daemon thread keeps the status current while the block runs (see the module's docstring)."""
        stop = threading.Event()
        thread = threading.Thread(target=self._tick_loop, args=(stop,), name="sweeper-progress", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def _tick_loop(self, stop: threading.Event) -> None:
        period = 1.0 if self.live else self.interval_s
        while not stop.wait(min(0.5, period)):
            with self._lock:
                if time.monotonic() - self._last_call >= period:
                    self._tick(self._running, self._queued)

    def phase(self, text: str | None) -> None:
        """What the sweep waits on before its runs start ("preflight rope"), shown with its age; None: over."""
        with self._lock:
            self._phase = (text, time.monotonic()) if text else None
            self._last_call = 0.0 if text else self._last_call      # a new phase shows at the next beat

    # -- events ---------------------------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        with self._lock:
            self._erase()
            print(f"[sweeper {time.strftime('%H:%M:%S')}] {msg}", file=self.stream, flush=True)
            self._draw()

    @_locked
    def skipped(self, run, state: str = Status.FINISHED.value) -> None:
        state = str(state)
        self.counts["skipped" if state == Status.FINISHED else state] += 1
        why = "already finished" if state == Status.FINISHED else f"{state}: an outcome, kept"
        self.log(f"skip   {run.label} ({why})")

    @_locked
    def started(self, run, slot) -> None:
        self._seen.pop(run.label, None)
        cores = getattr(slot, "cores", ())
        threads = getattr(run, "threads", None) or getattr(slot, "threads", None)   # a resumed run keeps its own
        where = f" (cores {','.join(map(str, cores))}, {threads} thread{'s' if threads != 1 else ''})" if cores else ""
        self.log(f"start  {run.label} on {slot.name}{where}")

    @_locked
    def retrying(self, run, status: dict, failure, attempt: int, max_attempts: int, delay_s: float) -> None:
        self.log(f"RETRY  {run.label}: attempt {attempt}/{max_attempts} failed ({failure.kind}: {failure.message}); "
                 f"retrying in {delay_s:g}s (log: {getattr(run, 'log_path', '')})")

    @_locked
    def ended(self, run, status: dict, wall_s: float) -> None:
        self._stalled.pop(run.label, None)
        self.health_news(run)
        state = str(status.get("status") or Status.FAILED.value)
        self.counts[state] = self.counts.get(state, 0) + 1
        run_dir = getattr(run, "run_dir", None)
        copies = []
        if state == Status.FINISHED:
            self._durations.append(wall_s)
            final = final_metrics(run_dir)
            detail = _finals_text(final, self.metric)
            copies = self._copies(run, final)
        else:
            log = getattr(run, "log_path", None) or (RunDir(run_dir).log_path if run_dir is not None else "")
            kind = f"{status['failure_class']}: " if status.get("failure_class") else ""
            detail = f"{kind}{status.get('error') or ''} (log: {log})"
        self.log(f"{state.upper() if state != Status.FINISHED else 'done':<6} {run.label} in {wall_s:.1f}s {detail} "
                 f"[{self.done}/{self.total}]")
        for line in copies:
            self.log(line)

    def _copies(self, run, final: dict) -> list[str]:
        """The checks across runs the live view can make as runs end (sweeper.analysis.integrity makes them all at
        the report, curves included): final metrics equal to another seed's of the variant (seeds_no_effect) or to
        the baseline's at the same seed (change_no_effect). Only finals with a fractional number are compared: a
        count or a rate at its bound may coincide."""
        variant, seed = getattr(run, "variant", None), getattr(run, "seed", None)
        if variant is None or seed is None or not any(isinstance(v, float) and not float(v).is_integer()
                                                      for v in final.values()):
            return []
        self._finals[(variant, seed)] = final
        lines = []
        twin = next((s for (v, s), f in self._finals.items() if v == variant and s != seed and f == final), None)
        if twin is not None and ("seeds_no_effect", variant) not in self._copies_named:
            self._copies_named.add(("seeds_no_effect", variant))
            lines.append(f"INTEGRITY seeds_no_effect: {run.label} ended with exactly the final metrics of "
                         f"{variant}/seed_{twin}: the seed may not reach the code (the report checks the curves too)")
        if self.baseline and variant == self.baseline:     # the variants that already ended at this seed
            same = [v for (v, s), f in self._finals.items() if s == seed and v != variant and f == final]
        else:
            same = [variant] if self._finals.get((self.baseline, seed)) == final else []
        for v in same:
            if v in self.controls or ("change_no_effect", v) in self._copies_named:
                continue
            self._copies_named.add(("change_no_effect", v))
            lines.append(f"INTEGRITY change_no_effect: {v}/seed_{seed} ended with exactly the final metrics of "
                         f"{self.baseline}/seed_{seed}: the change of {v} may not reach the code (the report checks "
                         f"the curves too)")
        return lines

    @_locked
    def health_news(self, run) -> None:
        """Print a run's health warnings and failures the moment its health verdict first shows them."""
        run_dir = getattr(run, "run_dir", None)
        path = RunDir(run_dir).health_path if run_dir is not None else None
        try:
            mtime = path.stat().st_mtime if path else None
        except OSError:
            return
        seen = self._health.setdefault(run.label, {"mtime": None, "reported": set()})
        if mtime is None or mtime == seen["mtime"]:
            return
        seen["mtime"] = mtime

        try:
            report = HealthReport.read(path)
        except (ValueError, OSError):      # being rewritten, or damaged: the report names it
            return
        for check in report.checks:
            key = (check.name, check.status)
            if check.status in ("fail", "warn") and key not in seen["reported"]:
                seen["reported"].add(key)
                self.log(f"HEALTH {check.status.upper()} {run.label}: {check.name}: {check.message}")
        d = report.diagnosis or {}
        key = ("diagnosis", d.get("name"))
        if d.get("name") and d["name"] != "healthy" and key not in seen["reported"]:
            seen["reported"].add(key)
            verdict = "invalidates the run" if d.get("invalidates") else d.get("kind", "")
            self.log(f"DIAGNOSIS {run.label}: {d['name']} ({verdict}): {d.get('message', '')}"
                     + (f"; fix: {d['fix']}" if d.get("fix") else ""))

    @_locked
    def stalled(self, run, idle_s: float, why: str) -> None:
        """A running run has shown no progress (output, metrics, CPU time) for idle_s seconds: named once."""
        self._stalled[run.label] = time.monotonic() - idle_s
        self.log(f"STALL  {run.label}: no new output, metrics or CPU time for {fmt_s(idle_s)}; {why}")

    @_locked
    def stall_over(self, run, idle_s: float) -> None:
        if self._stalled.pop(run.label, None) is not None:
            self.log(f"moving {run.label} again after {fmt_s(idle_s)} without progress")

    @_locked
    def not_started(self, run, status: dict) -> None:
        self.counts[Status.PENDING.value] += 1
        self.log(f"NOT STARTED {run.label}: {status.get('error', '')}")

    @property
    def settled(self) -> int:
        """Runs this invocation is through with, one way or another (for the queue count)."""
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        """Runs that ended for good (finished, diverged, failed, skipped as kept): an interrupted run resumes on
        the next launch and a run not started is still to run, so neither is done."""
        return self.settled - self.counts[Status.INTERRUPTED.value] - self.counts[Status.PENDING.value]

    # -- status view ----------------------------------------------------------------------------------------
    def tick(self, running: list, queued: int | None = None, force: bool = False) -> None:
        """running: [(run, slot)] now running; queued: runs waiting (default: what is neither done nor running)."""
        with self._lock:
            self._last_call = time.monotonic()
            self._tick(running, queued, force)

    def _tick(self, running: list, queued: int | None = None, force: bool = False) -> None:
        self._running, self._queued = list(running), queued
        self._slots = max(self._slots, len(running))
        now = time.monotonic()
        if now - self._last_observe >= 0.2:      # first (time, step) of each attempt: the base of its ETA
            self._last_observe = now
            for run, _ in self._running:
                self.health_news(run)
                step = last_metrics(getattr(run, "run_dir", None)).get("step")
                if step is not None:
                    self._seen.setdefault(run.label, (now, step))
        period = 1.0 if self.live else self.interval_s
        if not force and now - self._last_tick < period:
            return
        self._last_tick = now
        if self.live:
            self._erase()
            self._draw(fresh=True)
        else:
            head, rows = self._status()
            rows = fit_rows(rows, PLAIN_ROWS)
            print(f"[sweeper {time.strftime('%H:%M:%S')}] {head}" + (": " + "; ".join(r.strip() for r in rows)
                                                                       if rows else ""), file=self.stream, flush=True)

    def close(self) -> None:
        """Final redraw of the live view with nothing running (plain mode: nothing)."""
        with self._lock:
            self._running, self._phase = [], None
            if self.live:
                self._erase()
                self._draw(fresh=True)

    def _status(self) -> tuple[str, list[str]]:
        rows, etas = self._rows()
        return self._head(etas), rows

    def _rows(self) -> tuple[list[str], list]:
        """One line per running run (its last metrics line read from its file) and its ETA."""
        now = time.monotonic()
        rows, etas = [], []
        for run, slot in self._running:
            m = last_metrics(getattr(run, "run_dir", None))
            steps, step = _total_steps(run), m.get("step")
            eta = None
            if step is not None:
                t_first, s_first = self._seen.setdefault(run.label, (now, step))
                if step > s_first and steps:
                    eta = (steps - step) * (now - t_first) / (step - s_first)
            etas.append(eta)
            value = m.get("train_loss", m.get("loss"))
            loss = f"  loss {value:.3f}" if isinstance(value, (int, float)) else ""
            where = f"step {step if step is not None else 0:>5}/{steps}" if steps else ""
            since = self._stalled.get(run.label)
            stall = f"  STALLED {fmt_s(now - since)}" if since is not None else ""
            rows.append(f"  {run.label:<24} {slot.name:<8} {where}{loss}  ETA {fmt_s(eta)}{stall}")
        return rows, etas

    def _head(self, etas: list) -> str:
        now = time.monotonic()
        queued = self._queued if self._queued is not None else max(0, self.total - self.settled - len(self._running))
        failed = self.counts[Status.FAILED.value]
        done = self.done - failed
        interrupted = self.counts[Status.INTERRUPTED.value]
        stopped = f"{interrupted} interrupted (resume: run again) | " if interrupted else ""
        stalled = f"{len(self._stalled)} stalled | " if self._stalled else ""
        phase = f"{self._phase[0]} {fmt_s(now - self._phase[1])} | " if self._phase else ""
        return (
            f"sweep: {phase}{queued} queued | {len(self._running)} running | {stalled}{done} done | {failed} failed | "
            f"{stopped}"
            f"{fmt_s(now - self.t0)} elapsed | ETA {fmt_s(self._sweep_eta(etas, queued))}"
        )

    def _sweep_eta(self, etas: list, queued: int) -> float | None:
        if not self._running and not queued:
            return 0.0
        if any(e is None for e in etas):
            return None
        per_run = (sum(self._durations) / len(self._durations)) if self._durations else None
        if queued and per_run is None:
            return None
        work = sum(etas) + queued * (per_run or 0.0)
        return max(max(etas, default=0.0), work / max(1, self._slots))

    def _draw(self, fresh: bool = False) -> None:
        """The view below the event lines; fresh: read the run files again (else the last view, its head
        recounted: an event changes the counts, not the running runs' steps)."""
        if not self.live:
            return
        if fresh or self._view is None:
            self._view = self._rows()
        rows, etas = self._view
        head = self._head(etas)
        size = shutil.get_terminal_size((120, 24))
        width = size.columns
        lines = [head] + fit_rows(rows, max(1, size.lines - 4))
        self.stream.write("".join(line[: width - 1] + "\n" for line in lines))
        self.stream.flush()
        self._block_lines = len(lines)

    def _erase(self) -> None:
        if self.live and self._block_lines:
            self.stream.write(f"\x1b[{self._block_lines}F\x1b[J")  # up to the block's first line, clear below
            self._block_lines = 0


def fit_rows(rows: list[str], limit: int) -> list[str]:
    """At most `limit` lines: the first rows, then one line counting the rest."""
    if len(rows) <= limit:
        return rows
    keep = max(0, limit - 1)
    return rows[:keep] + [f"  ... and {len(rows) - keep} more running"]


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
