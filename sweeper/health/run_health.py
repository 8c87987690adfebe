"""The health side of one training run (what train/loop.py calls): preflight at the start, the live monitor
during training, and RUN_DIR/health.json.

    health = RunHealth(cfg, model, corpus, run_dir, step, saved=ckpt_extra.get("health"))
    rec = health.after_backward(step, loss_value, grad_norm)   # {} or health/... metrics; NaN -> diverged
    rec.update(health.after_step(step))
    extra["health"] = health.state_dict()                     # into each checkpoint: a resumed run keeps it
    health.finish(outcome)                                    # final health.json: preflight + monitor checks

health.json is written after preflight, again whenever the monitor raises a new warning (so the sweeper can
show failures while the run goes on), and at the end. A resumed run keeps the preflight checks it started
with (the preflight ran on the model at init, not on the resumed one). A preflight that cannot run becomes a
warning in health.json, never a crashed run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .monitor import LiveMonitor
from .result import CheckResult, HealthReport


class RunHealth:
    def __init__(self, cfg: Any, model: Any, corpus: Any, run_dir: str | Path, step: int,
                 saved: dict[str, Any] | None = None):
        from .runner import CHECKS

        self.path = Path(run_dir) / "health.json"
        self.monitor = LiveMonitor(model, interval=cfg.health.interval, num_classes=corpus.vocab_size)
        self.preflight: list[CheckResult] = []
        if saved:
            self.monitor.load_state_dict(saved.get("monitor") or {})
            self.preflight = [CheckResult.from_dict(c) for c in saved.get("preflight") or []]
        elif step > 0 and self.path.exists():          # resumed without saved health state: keep the old preflight
            try:
                self.preflight = [c for c in HealthReport.read(self.path).checks if c.name in CHECKS]
            except (OSError, ValueError, KeyError):
                self.preflight = []
        elif step == 0 and cfg.health.preflight:
            self.preflight = self._run_preflight(cfg, model, corpus)
        self.write()

    @staticmethod
    def _run_preflight(cfg: Any, model: Any, corpus: Any) -> list[CheckResult]:
        from .run_config import preflight_model

        try:
            report = preflight_model(cfg, model, corpus)
        except Exception as e:  # noqa: BLE001 - a check machinery problem must not kill the run
            report = HealthReport([CheckResult("preflight", "warn", None, "",
                                               f"preflight could not run: {type(e).__name__}: {e}")])
        print(f"health preflight: {report.verdict.upper()}", flush=True)
        for c in report.failures + report.warnings:
            print(f"health {c.status.upper()} {c.name}: {c.message}", flush=True)
        return report.checks

    def after_backward(self, step: int, loss: Any, grad_norm: Any = None) -> dict[str, Any]:
        rec = self.monitor.after_backward(step, loss, grad_norm)
        return self._note(rec)

    def after_step(self, step: int) -> dict[str, Any]:
        return self._note(self.monitor.after_step(step))

    def _note(self, rec: dict[str, Any]) -> dict[str, Any]:
        if "health/warning" in rec:
            print(f"health WARN: {rec['health/warning']}", flush=True)
            self.write()
        return rec

    def report(self) -> HealthReport:
        return HealthReport(list(self.preflight)).merged(self.monitor.report())

    def write(self) -> HealthReport:
        report = self.report()
        report.write(self.path)
        return report

    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor.state_dict(), "preflight": [c.to_dict() for c in self.preflight]}

    def finish(self, outcome: dict[str, Any]) -> HealthReport:
        """Final health.json. A diverged run's `finite` check records the step and the last good checkpoint."""
        fields = outcome.get("status_fields", {})
        if fields.get("status") == "diverged":
            if self.monitor.diverged is None:
                self.monitor.diverged = {"step": fields.get("diverged_at_step"), "reason": fields.get("error")}
            self.monitor.diverged["last_good_checkpoint"] = fields.get("last_good_checkpoint")
        report = self.write()
        if report.verdict != "pass":
            print(f"health: {report.verdict.upper()} "
                  f"({', '.join(c.name for c in report.failures + report.warnings)})", flush=True)
        return report
