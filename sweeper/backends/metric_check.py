"""Fail fast on metrics: the first finished run that lacks the decision metric, or reports it as a non-number, stops
the sweep (one line naming the metric, what the run did report and the fix; exit 2); secondary metrics warn.

    check = MetricCheck(plan.experiment)
    problem = check.settle(run_dir, "nope/seed_0", print)   # the one stop line (None: the run is usable); a
                                                           # run without it becomes failed (its result set
                                                           # aside), so the corrected command reruns it

Why at the first run: a metric typo (`metric: val_acc` for a run that reports `val_loss`) otherwise costs the whole
sweep's compute before the report finds it. Pure Python; reads the run's summary through RunDir only.
"""
from __future__ import annotations

import time
from pathlib import Path

from sweeper.run.files.logcap import cut_so_far
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from sweeper.run.observed.reported import describe


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class MetricCheck:
    def __init__(self, experiment):
        self.experiment = experiment
        self.warned: set[str] = set()

    def run(self, run_dir: Path, label: str) -> tuple[str | None, list[str]]:
        """(the stop line or None, new warnings about secondary metrics) for one finished run."""
        try:
            summary = RunDir(run_dir).read_summary()
        except UnreadableFile:
            return None, []
        if summary is None or summary.status is not Status.FINISHED:
            return None, []
        final, exp = dict(summary.final), self.experiment
        reported = describe(final)
        glue = summary.extra.get("reported_by") is not None
        metric = exp.metric
        problem = None
        if metric not in final:
            numbers = [k for k, v in final.items() if is_number(v)]
            if numbers:
                fix = (f"set experiment.metric to the name the run reports ({', '.join(numbers[:6])}), or make the "
                       f"run report {metric}")
            elif glue:
                fix = (f"make the script print one JSON line such as {{\"{metric}\": 0.42}} (or write it to a "
                       f".json/.csv file in {{out_dir}}; task.metrics says where)")
            else:
                fix = f"end the run with run.finish({metric}=value) (or return {{'{metric}': value}} from the entry)"
            cut = max(summary.extra.get("log_cut_bytes") or 0, cut_so_far(RunDir(run_dir).log_path)) if glue else 0
            if cut:
                fix += (f". Its log was cut to launcher.max_log_mb ({cut} bytes of output cut); the metric lines of "
                        f"the cut part were kept (stdout.kept.log) and none named {metric}")
            problem = (f"run {label} finished without the decision metric {metric} (experiment.metric); it "
                       f"reported: {reported}. Fix: {fix}")
        elif not is_number(final[metric]):           # NaN/inf are numbers: a diverged outcome, not a typo
            problem = (f"run {label} reported the decision metric {metric}={final[metric]!r} "
                       f"({type(final[metric]).__name__}), not a number; it reported: {reported}. Fix: report a "
                       f"number, e.g. {metric}=float(value)")
        if problem:
            problem += "; finished runs are kept and the same command, corrected, continues the sweep"
        warnings = []
        for name in exp.secondary_metrics or {}:
            value = final.get(name, summary.extra.get("cost", {}).get(name) if isinstance(summary.extra.get("cost"),
                                                                                           dict) else None)
            if name not in self.warned and not is_number(value):
                self.warned.add(name)
                what = "did not report it" if value is None else f"reported {value!r}, not a number"
                warnings.append(f"secondary metric {name}: run {label} {what} (it reported: {reported}); it is "
                                f"left out of the report's secondary table where missing")
        return problem, warnings

    def settle(self, run_dir: Path, label: str, log=None) -> str | None:
        """What every backend does with a finished run: `run`, its warnings to `log` (a one-line printer or
        None), and a run without a usable decision metric rejected. Returns the stop line (None: usable)."""
        problem, warnings = self.run(run_dir, label)
        for warning in warnings if log is not None else ():
            log(f"warning: {warning}")
        if problem:
            self.reject(run_dir, problem)
        return problem

    @staticmethod
    def reject(run_dir: Path, problem: str) -> None:
        """The run did not give a usable result: status failed (config_error), its summary set aside
        (RunDir.set_aside_summary), so a resume reruns it with the corrected command."""
        rd = RunDir(run_dir)
        rd.set_aside_summary()
        rd.update_status(Status.FAILED, error=problem, exit_code=2, ended=time.time(), failure_class="config_error",
                         transient=False)

