"""The health preflight beside the baseline's own seeds: the runs the preflight gates wait for it, the rest do not.

    gate = PreflightGate.start(plan, progress, place)     # the preflights run in a thread (each in its own process)
    statuses = backend.launch(plan, conf, progress, gate=gate)   # the pool asks the gate before each start
    gate.close()                                          # joins it (close(stop=True) on Ctrl-C: stops it first)

What it gates (sweeper.execute.preflight.health_preflight, unchanged): the baseline's preflight first, then with
sweeper.preflight=warn|stop every other variant's. While they run, the other variants' runs wait and the slot the
preflight runs on (Backend.preflight_place: the plan's first slot) is kept for it; the baseline's own seeds start
on the other slots at once: a failing baseline preflight does not make them wrong to run, only the comparison.
So on a 2-slot machine the sweep's seeds wait on the preflight only where they must (the variants), and no slot
stands idle while it runs. When it is over:
- passed (or warned): every run may start; a variant stopped by sweeper.preflight=stop is dropped (its runs were
  already marked failed by health_preflight);
- the baseline failed: the pool stops (the baseline's running seeds are interrupted), no variant starts, the
  baseline's seeds that ran beside it are discarded (discard_beside: back to pending, their summary and
  checkpoints set aside: the fixed baseline runs them from scratch), and the sweep ends with the refusal
  (PreflightRefused), as before.
"""
from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, field

from sweeper.execute.preflight import health_preflight, stop_process
from sweeper.run.files.status_values import Status


@dataclass
class PreflightGate:
    """What the pool asks (sweeper.backends.local.pool.run_pool's `gate`): holds(group), kept_slots(), outcome()."""
    baseline: str
    kept: frozenset = frozenset({0})           # slot indices the preflight runs on while it runs
    refusal: str | None = None                 # set when the baseline failed its preflight
    dropped: frozenset = frozenset()           # variants sweeper.preflight=stop stopped
    error: BaseException | None = None         # what the preflight thread raised (raised again by close())
    _done: threading.Event = field(default_factory=threading.Event)
    _procs: list = field(default_factory=list)
    spawning: threading.Lock = field(default_factory=threading.Lock)   # held while a preflight process starts
    _thread: threading.Thread | None = None
    _spawns: "_Spawns | None" = None

    @classmethod
    def start(cls, plan, progress, place) -> "PreflightGate":
        gate = cls(baseline=plan.experiment.baseline)
        gate._spawns = _Spawns(gate)
        gate._thread = threading.Thread(target=gate._run, args=(plan, progress, place), name="sweeper-preflight",
                                        daemon=True)
        gate._thread.start()
        return gate

    def _run(self, plan, progress, place) -> None:
        try:
            left, refusal = health_preflight(plan, progress, place, started=self._spawns)
            self.refusal = refusal
            self.dropped = frozenset({r.variant for r in plan.runs} - {r.variant for r in left.runs})
        except BaseException as e:  # noqa: BLE001 - handed to the sweep's own thread by close()
            self.error = e
        finally:
            self._done.set()

    # -- what the pool asks -------------------------------------------------------------------------------------
    def pending(self) -> bool:
        return not self._done.is_set()

    def holds(self, group: str) -> bool:
        """Whether a run of this variant must wait: every variant but the baseline, while the preflight runs."""
        return self.pending() and group != self.baseline

    def pids(self) -> set[int]:
        """The preflight processes started so far (the pool's subreaper must not take them for orphans: read
        them under `spawning`, so that none starts between the read and a kill of orphans)."""
        return {proc.pid for proc in self._procs}

    def kept_slots(self) -> frozenset:
        return self.kept if self.pending() else frozenset()

    def outcome(self) -> tuple[str | None, frozenset] | None:
        """None while it runs; then (why the sweep must stop, or None; the variants to drop)."""
        if self.pending():
            return None
        if self.error is not None:
            return f"the health preflight failed to run: {type(self.error).__name__}: {self.error}", frozenset()
        return self.refusal, self.dropped

    # -- the sweep's own thread ---------------------------------------------------------------------------------
    def close(self, stop: bool = False) -> None:
        """Wait for the preflight (stop: the sweep is stopping, so stop its process first). Raises what the
        preflight raised."""
        if stop and self.pending():
            self._spawns.stopped = True           # its end is not a verdict: preflight._check says nothing
            with self.spawning:
                for proc in self._procs:
                    stop_process(proc)
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error


def discard_beside(plan, started: list) -> list[str]:
    """After the baseline failed its preflight: the baseline's runs that ran beside it in this launch (`started`:
    their RunSpecs, not finished or diverged when the launch began) are set back to pending, their summary and
    checkpoints set aside (summary.rejected.json, ckpt.rejected/), so the next launch, after the fix, runs them
    from scratch instead of keeping a broken baseline's result. Returns their labels."""
    discarded = []
    for run in started:
        rd = run.rundir
        if rd.state() is Status.PENDING and not rd.summary_path.exists():
            continue                          # never started
        rd.set_aside_summary()
        rd.set_aside_checkpoints()
        rd.update_status(Status.PENDING, exit_code=None, ended=None, pid=None,
                         error="discarded: it ran beside the baseline's failing health preflight; it runs again, "
                               "from scratch, on the next launch")
        discarded.append(run.label)
    return discarded


class _Spawns:
    """health_preflight's `started`: a context (the gate's spawning lock) around each preflight process's start,
    called with the process."""

    def __init__(self, gate: PreflightGate):
        self.gate = gate
        self.stopped = False                     # set by the gate's close(): the sweep stopped it

    def __enter__(self):
        self.gate.spawning.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.gate.spawning.release()

    def __call__(self, proc: subprocess.Popen) -> None:
        self.gate._procs.append(proc)
