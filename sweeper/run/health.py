"""The health side of one run: optional preflight at the start, the live monitor during training, health.json.

    health = run.health(model, num_classes=V, interval=10, preflight=lambda: preflight(model, loss_fn, batch))
    loss.backward(); health.after_backward(step, loss, grad_norm)   # {} or health/... metrics; NaN -> diverged
    optimizer.step(); health.after_step(step)                       # update/weight ratios on interval steps
    health.diverged                                                 # None, or {"step", "reason"}

What it measures goes into the next `run.log(step, ...)` line by itself; its state goes into every
`run.save_checkpoint` and comes back with `run.load_checkpoint` (a resumed run keeps its preflight checks and
monitor history). health.json is written after preflight, again whenever the monitor raises a new warning (so
the sweeper can show failures while the run goes on), and at the end (`run.finish` / `run.diverged`). A
preflight that cannot run becomes an "error" check in health.json, never a crashed run; the monitor never raises.
A rank > 0 of a multi-rank run gets a SilentHealth instead: rank 0 watches the model (the same on every rank).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from sweeper.health.monitor import LiveMonitor
from sweeper.health.result import CheckResult, HealthReport
from sweeper.health.thresholds import DEFAULT_THRESHOLDS, Thresholds


class RunHealth:
    def __init__(self, model: Any, path: str | Path, *, interval: int = 10, num_classes: int | None = None,
                 preflight: Callable[[], HealthReport] | None = None, saved: dict[str, Any] | None = None,
                 resumed: bool = False, thresholds: Thresholds = DEFAULT_THRESHOLDS):
        self.path = Path(path)
        self.monitor = LiveMonitor(model, interval=interval, num_classes=num_classes, thresholds=thresholds)
        self.preflight: list[CheckResult] = []
        self.pending: dict[str, Any] = {}          # measured, not yet logged (run.log takes it)
        if saved:
            self.load_state_dict(saved)
        elif resumed and self.path.exists():       # resumed without saved health state: keep the old preflight
            from sweeper.health.runner import CHECKS

            try:
                self.preflight = [c for c in HealthReport.read(self.path).checks if c.name in CHECKS]
            except ValueError:
                self.preflight = []
        elif not resumed and preflight is not None:
            self.preflight = self._run_preflight(preflight)
        self.write()

    @staticmethod
    def _run_preflight(preflight: Callable[[], HealthReport]) -> list[CheckResult]:
        try:
            report = preflight()
        except Exception as e:  # noqa: BLE001 - a check machinery problem must not kill the run
            report = HealthReport([CheckResult("preflight", "error", None, "",
                                               f"preflight could not run: {type(e).__name__}: {e}")])
        print(f"health preflight: {report.summary_line().removeprefix('verdict: ')}", flush=True)
        for c in report.failures + report.warnings + report.errors:
            print(f"health {c.status.upper()} {c.name}: {c.message}", flush=True)
        return report.checks

    @property
    def diverged(self) -> dict | None:
        return self.monitor.diverged

    def after_backward(self, step: int, loss: Any, grad_norm: Any = None) -> dict[str, Any]:
        return self._note(self.monitor.after_backward(step, loss, grad_norm))

    def after_step(self, step: int) -> dict[str, Any]:
        return self._note(self.monitor.after_step(step))

    def _note(self, rec: dict[str, Any]) -> dict[str, Any]:
        self.pending.update(rec)
        if "health/warning" in rec:
            print(f"health WARN: {rec['health/warning']}", flush=True)
            self.write()
        return rec

    def take_pending(self) -> dict[str, Any]:
        out, self.pending = self.pending, {}
        return out

    def report(self) -> HealthReport:
        return HealthReport(list(self.preflight)).merged(self.monitor.report())

    def write(self) -> HealthReport:
        report = self.report()
        report.write(self.path)
        return report

    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor.state_dict(), "preflight": [c.to_dict() for c in self.preflight]}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        self.monitor.load_state_dict(saved.get("monitor") or {})
        self.preflight = [CheckResult.from_dict(c) for c in saved.get("preflight") or []]

    def finish(self, diverged_at: int | None = None, reason: str | None = None,
               last_good_checkpoint: int | None = None) -> HealthReport:
        """Final health.json. A diverged run's `finite` check records the step and the last good checkpoint."""
        if diverged_at is not None:
            if self.monitor.diverged is None:
                self.monitor.diverged = {"step": diverged_at, "reason": reason}
            self.monitor.diverged["last_good_checkpoint"] = last_good_checkpoint
        report = self.write()
        if report.verdict != "pass":
            print(f"health: {report.verdict.upper()} "
                  f"({', '.join(c.name for c in report.failures + report.warnings)})", flush=True)
        return report


class SilentHealth:
    """What run.health gives a rank > 0 of a multi-rank run: rank 0 watches the model (the same on every rank)
    and writes health.json; here every call measures nothing and returns nothing."""
    diverged = None
    preflight: list = []

    def after_backward(self, step: int, loss: Any, grad_norm: Any = None) -> dict[str, Any]:
        return {}

    def after_step(self, step: int) -> dict[str, Any]:
        return {}

    def take_pending(self) -> dict[str, Any]:
        return {}

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        pass

    def finish(self, diverged_at: int | None = None, reason: str | None = None,
               last_good_checkpoint: int | None = None) -> None:
        return None
