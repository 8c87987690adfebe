"""How a run stops and ends, as methods of sweeper.run.Run (a mixin): the stop request, the run's outcome, its summary.

    if run.should_stop: sys.exit(run.interrupt(step))     # a signal arrived: exit 75, the next launch resumes
    run.finish(val_loss=v)                                # finished: the summary holds the final metrics
    run.diverged(step, "loss is nan")                     # an outcome, kept and flagged, never rerun
    run.fail("why")                                       # failed (the entry runner and the crash hook)
"""
from __future__ import annotations

import sys
import time
from typing import Any, Mapping

from sweeper.run.files.records import Summary
from sweeper.run.files.status_values import EXIT_INTERRUPTED, Status
from sweeper.run.observed.provenance import code_files
from sweeper.run.ranks import any_rank, leave_group


class RunEnding:
    """Needs Run's state (stop, dir, is_main, _health, _t0, _wall_before, ...), RunSeeds._stream_record and
    RunUsage._usage."""

    @property
    def should_stop(self) -> bool:
        """True once a stop signal arrived: save a checkpoint and `sys.exit(run.interrupt(step))`. Several
        ranks: a collective, True on every rank once one rank got the signal (they stop at the same step)."""
        local = self.stop.requested is not None
        if not self._collective():
            return local
        agreed = any_rank(local)
        if agreed and not local:
            self.stop.requested = "a stop request of another rank"
        return agreed

    def request_stop(self, reason: str) -> None:
        self.stop.requested = self.stop.requested or reason

    def interrupt(self, step: int) -> int:
        """Record the run as stopped at `step` with a checkpoint saved; returns the exit status to use (75)."""
        why = f"stopped by {self.stop.requested or 'request'} at step {step}; checkpoint saved"
        self._end(Status.INTERRUPTED, {}, step, error=why, exit_code=EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED

    def finish(self, final: Mapping | None = None, *, steps: int | None = None, cost: Mapping | None = None,
               **metrics: Any) -> dict:
        """Record the run's final metrics in its summary and mark it finished. Returns the summary.

        cost: figures of what the run cost that depend on the machine, not on the seed (e.g. tokens_per_s); they
        go to the summary's `cost` beside the measured wall_time_s and peak_rss_mb (never into `final`, which
        is the run's bitwise-reproducible result) and the report can use them as secondary metrics.
        The documented keys examples_seen, tokens_seen, optimizer_steps, train_size and eval_size are what the run
        consumed and its data's sizes: they go to the summary's `used` block (sweeper.run.usage), not `final`."""
        return self._end(Status.FINISHED, {**dict(final or {}), **metrics}, steps, error=None, exit_code=0,
                         cost=cost)

    def diverged(self, step: int, reason: str, last_good_checkpoint: int | None = None, **final: Any) -> dict:
        """Record a NaN/inf loss or gradient: status "diverged" (an outcome, kept and flagged, never rerun)."""
        if self._health is not None:
            self._health.finish(diverged_at=step, reason=reason, last_good_checkpoint=last_good_checkpoint)
        return self._end(Status.DIVERGED, final, step, error=f"{reason} at step {step}", exit_code=0,
                         diverged_at_step=step, last_good_checkpoint=last_good_checkpoint)

    def fail(self, error: str, exit_code: int = 1) -> None:
        """Record a failure (the entry runner and the crash hook call this). A rank > 0 says it on its own
        output only: the launcher names the rank whose exit ended the run."""
        self.outcome = Status.FAILED
        if self.is_main:
            self.dir.update_status(Status.FAILED, error=error, exit_code=exit_code, ended=time.time())
        else:
            print(f"rank {self.rank} of {self.world_size} failed: {error}", file=sys.stderr, flush=True)
        self.close()

    def _wall_s(self) -> float:
        """The run's wall time so far: every earlier segment's up to the checkpoint it resumed from, and this one's
        (work redone after a kill, and the time between segments, are not counted)."""
        return self._wall_before + (time.time() - self._t0)

    def _end(self, status: Status, final: Mapping, steps: int | None, cost: Mapping | None = None,
             **fields) -> dict:
        if self._health is not None and status is not Status.DIVERGED:
            self._health.finish()
        steps = steps if steps is not None else self._last_step
        wall = self._wall_s()
        measured = {"wall_time_s": wall, "peak_rss_mb": _peak_rss_mb()}
        final = {k: plain(v) for k, v in final.items()}
        used = self._usage(final)            # examples_seen=... and the like move out of final (sweeper.run.usage)
        summary = Summary(status=status, final=final, steps=steps, used=used,
                          wall_time_s=wall, run_id=self.run_id, experiment=self.experiment,
                          variant=self.variant, seed=self.seed, config_hash=self.config_hash,
                          fingerprint={**(self._fingerprint or self.fingerprint()), **self._stream_record(),
                                       **self._recorded, "code_files": code_files()},   # what it ran, at its end
                          env=self.env,
                          extra={**self.extra, "cost": {**measured, **{k: plain(v) for k, v in (cost or {}).items()}}})
        if self.is_main:
            self.dir.write_summary(summary)
            self.dir.update_status(status, ended=time.time(), **fields)
        self.outcome, self.summary = status, summary.to_dict()
        self.close()
        return self.summary

    def close(self) -> None:
        """Restore the signal handlers, close TensorBoard, leave the process group (finish/interrupt/diverged/fail)."""
        self.stop.__exit__(None, None, None)
        leave_group()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB (Linux reports KiB; macOS bytes); None where unknown."""
    try:
        import resource  # optional: the stdlib has it on Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def plain(value: Any) -> Any:
    """Tensors and numpy scalars become Python numbers (metrics files hold JSON)."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        return value.item()
    return value
