"""The health side of one run: optional preflight at the start, the live monitor during training, health.json.

    health = run.health(model, num_classes=V, interval=10, preflight=lambda: preflight(model, loss_fn, batch))
    loss.backward(); health.after_backward(step, loss, grad_norm)   # {} or health/... metrics; NaN -> diverged
    optimizer.step(); health.after_step(step)                       # update/weight ratios on interval steps
    health.diverged                                                 # None, or {"step", "reason"}

With `val_data` (a validation batch or loader) and/or `evaluate` (your evaluation function, evaluate(model) ->
number or dict), a fresh run also checks that evaluating the same weights twice gives the same numbers
(eval_determinism: dropout left on, model.eval() forgotten) unless its preflight already did, and at the end
compares the trained model's BatchNorm running statistics with the validation batches' (batchnorm_stats).
Every after_backward notes whether the model trained in eval mode (train_mode: an evaluation's model.eval() not
undone). `health.val_data` / `health.evaluate` keep what was given, for whole-run diagnosis.

Validation metrics reach it through `run.log` itself: by convention a key `val_loss` / `val/loss` is the validation
loss and `val_acc`, `val_accuracy`, `val/acc` the validation accuracy; other names are declared with
`run.health(..., val_keys={"loss": "test_nll", "acc": "test_top1"})`. A logged `train_loss` (or `loss`) is the
train curve when the monitor is given no loss itself. With `optimizer=` and `total_steps=` the monitor also watches
the lr schedule and the optimizer's parameters. health.json carries the run's one diagnosis (sweeper.health.diagnosis).

What it measures goes into the next `run.log(step, ...)` line by itself; its state goes into every
`run.save_checkpoint` and comes back with `run.load_checkpoint` (a resumed run keeps its preflight checks and
monitor history). health.json is written after preflight, again whenever the monitor raises a new warning (so
the sweeper can show failures while the run goes on), and at the end (`run.finish` / `run.diverged`). A
preflight that cannot run becomes an "error" check in health.json, never a crashed run; the monitor never raises.
A rank > 0 of a multi-rank run gets a SilentHealth instead: rank 0 watches the model (the same on every rank).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from sweeper.health.checks.attribution import annotate_consequences
from sweeper.health.checks.batchnorm import batchnorm_report
from sweeper.health.checks.eval import ModeWatch, evaluation_checks
from sweeper.health.common.data_sources import read_batches
from sweeper.health.diagnosis import diagnose
from sweeper.health.live.monitor import LiveMonitor
from sweeper.health.result import CheckResult, HealthReport
from sweeper.health.runner import CHECKS
from sweeper.health.thresholds import DEFAULT_THRESHOLDS, Thresholds

VAL_PREFIXES = ("val_", "val/")
_VAL_NAMES = {"loss": "loss", "acc": "acc", "accuracy": "acc"}


def val_key_map(val_keys: Any) -> dict[str, str]:
    """{metric key: "loss" | "acc"} from run.health's val_keys: a dict {"loss": KEY, "acc": KEY} (either may be
    left out) or None for the convention alone. ValueError naming what is accepted otherwise."""
    if val_keys is None:
        return {}
    if not isinstance(val_keys, Mapping) or not set(val_keys) <= {"loss", "acc"} or \
            not all(isinstance(v, str) and v for v in val_keys.values()):
        raise ValueError(f"val_keys={val_keys!r}: expected a dict {{'loss': KEY, 'acc': KEY}} naming the run.log keys "
                         f"of the validation loss and accuracy (either may be left out)")
    return {key: kind for kind, key in val_keys.items()}


def val_kind(key: str, declared: dict[str, str]) -> str | None:
    if key in declared:
        return declared[key]
    for prefix in VAL_PREFIXES:
        if key.startswith(prefix):
            return _VAL_NAMES.get(key[len(prefix):])
    return None


class RunHealth:
    def __init__(self, model: Any, path: str | Path, *, interval: int = 10, num_classes: int | None = None,
                 preflight: Callable[[], HealthReport] | None = None, saved: dict[str, Any] | None = None,
                 resumed: bool = False, thresholds: Thresholds = DEFAULT_THRESHOLDS, optimizer: Any = None,
                 total_steps: int | None = None, val_keys: Mapping[str, str] | None = None, val_data: Any = None,
                 evaluate: Callable[..., Any] | None = None):
        self.path = Path(path)
        self.model, self.thresholds = model, thresholds
        self.val_data, self.evaluate = val_data, evaluate
        self.val_keys = val_key_map(val_keys)
        self.monitor = LiveMonitor(model, interval=interval, num_classes=num_classes, thresholds=thresholds,
                                   optimizer=optimizer, total_steps=total_steps)
        self.mode_watch = ModeWatch(model)
        self.final: list[CheckResult] = []           # checks measured at the end (batchnorm_stats on val_data)
        self.preflight: list[CheckResult] = []
        self.pending: dict[str, Any] = {}          # measured, not yet logged (run.log takes it)
        self._written: set[tuple[str, str]] = set()   # (check, status) of the last health.json write
        if saved:
            self.load_state_dict(saved)
        elif resumed and self.path.exists():       # resumed without saved health state: keep the old preflight

            try:
                self.preflight = [c for c in HealthReport.read(self.path).checks if c.name in CHECKS]
            except ValueError:
                self.preflight = []
        elif not resumed and preflight is not None:
            self.preflight = self._run_preflight(preflight)
        if not saved and not resumed and (val_data is not None or evaluate is not None) and \
                not any(c.name == "eval_determinism" for c in self.preflight):
            self.preflight += self._run_evaluation_checks()
        self.write()

    def _run_evaluation_checks(self) -> list[CheckResult]:
        try:
            checks = evaluation_checks(self.model, self.val_data, self.evaluate, self.thresholds)
        except Exception as e:  # noqa: BLE001 - an evaluate that fails must not kill the run
            checks = [CheckResult("eval_determinism", "error", None, "",
                                  f"evaluate could not run on the initial weights: {type(e).__name__}: {e}")]
        for c in checks:
            if c.status in ("warn", "fail", "error"):
                print(f"health {c.status.upper()} {c.name}: {c.message}", flush=True)
        return checks

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
        self.mode_watch.observe(step)
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

    def observe_metrics(self, step: int, metrics: Mapping[str, Any]) -> None:
        """What run.log got: validation metrics (by convention or val_keys) and a logged train loss. health.json
        is rewritten when a validation point changes a check's status (the live view sees it then)."""
        val: dict[str, float] = {}
        for key, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            kind = val_kind(key, self.val_keys)
            if kind is not None and kind not in val:
                val[kind] = float(value)
            elif key in ("train_loss", "loss"):
                self.monitor.observe_train_loss(step, float(value))
        if val:
            self.monitor.observe_eval(step, val_loss=val.get("loss"), val_acc=val.get("acc"))
            if {(c.name, c.status) for c in self.report().checks} != self._written:
                self.write()

    def report(self) -> HealthReport:
        final = {c.name for c in self.final}
        watch = self.mode_watch.result(self.thresholds)
        report = HealthReport([c for c in self.preflight if c.name not in final]).merged(self.monitor.report())
        checks = annotate_consequences(report.merged(([watch] if watch else []) + list(self.final))).checks
        return HealthReport(checks, diagnosis=diagnose(checks))

    def write(self) -> HealthReport:
        report = self.report()
        report.write(self.path)
        self._written = {(c.name, c.status) for c in report.checks}
        return report

    def state_dict(self) -> dict[str, Any]:
        return {"monitor": self.monitor.state_dict(), "preflight": [c.to_dict() for c in self.preflight],
                "mode_watch": self.mode_watch.state_dict()}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        self.monitor.load_state_dict(saved.get("monitor") or {})
        self.preflight = [CheckResult.from_dict(c) for c in saved.get("preflight") or []]
        self.mode_watch.load_state_dict(saved.get("mode_watch") or {})

    def _final_checks(self) -> list[CheckResult]:
        """The trained model's BatchNorm running statistics against the validation batches."""
        if self.val_data is None:
            return []
        import torch  # deferred: torch (about 2 s to import), only when this runs

        try:
            with torch.random.fork_rng(devices=[]):         # a shuffling loader draws from the global RNG
                batches, _ = read_batches(self.val_data, max(int(self.thresholds.data_batches), 1))
            result = batchnorm_report(self.model, [], batches, self.thresholds, calibrate=False, trained=True)
        except Exception as e:  # noqa: BLE001 - never into the end of a run
            result = CheckResult("batchnorm_stats", "error", None, "", f"could not measure: {type(e).__name__}: {e}")
        return [] if result.status == "skip" else [result]

    def finish(self, diverged_at: int | None = None, reason: str | None = None,
               last_good_checkpoint: int | None = None) -> HealthReport:
        """Final health.json. A diverged run's `finite` check records the step and the last good checkpoint."""
        if diverged_at is not None:
            if self.monitor.diverged is None:
                self.monitor.diverged = {"step": diverged_at, "reason": reason}
            self.monitor.diverged["last_good_checkpoint"] = last_good_checkpoint
        else:
            self.final = self._final_checks()
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

    def observe_metrics(self, step: int, metrics: Any) -> None:
        return None

    def take_pending(self) -> dict[str, Any]:
        return {}

    def state_dict(self) -> None:
        return None

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        pass

    def finish(self, diverged_at: int | None = None, reason: str | None = None,
               last_good_checkpoint: int | None = None) -> None:
        return None
