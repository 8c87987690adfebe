"""Naming the root cause when one problem makes several checks fail: inputs far from standardized (raw 0-255
pixels) blow up the initial loss, the update ratios and the overfit session, and each of those checks would
otherwise blame its usual suspect (the last layer's init, the learning rate).

    attribute_to_inputs(ctx, results, rerun)     # preflight: re-run the failing checks on standardized inputs
    annotate_consequences(report)                # a run's report: monitor checks that fail point at the inputs

Preflight measures the counterfactual: the checks that did not pass are run again with the flagged input tensors
standardized (checks.inputs.standardized). A check that then passes is a consequence of the inputs; its message
says so, with what it measures on standardized inputs, and the inputs check lists it (and fails when it caused a
failure). A check that still fails keeps its own diagnosis, with a note that the inputs need fixing too. The
monitor's checks during a run cannot be re-run; they get "likely a consequence of the inputs" instead.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from sweeper.health.checks.inputs import standardized
from sweeper.health.result import CheckResult, HealthReport

# checks whose readings scale with the inputs (not the data/evaluation checks, not the dependence checks)
SUSCEPTIBLE = ("init_loss", "gradient_flow", "overfit_batch", "update_ratio")
LIVE_SUSCEPTIBLE = ("grad_spike", "loss_stuck", "zero_grad_share", "update_ratio", "finite")


def _summary(inputs: CheckResult) -> str:
    parts = list(inputs.details.get("summary", {}).values())
    return "inputs not standardized (" + "; ".join(parts) + ")"


def attribute_to_inputs(ctx, results: dict[str, CheckResult],
                        rerun: Callable[[object, list[str]], dict[str, CheckResult]]) -> None:
    """Rewrite, in place, the results that only fail because of the flagged inputs."""
    inputs = results.get("inputs")
    if inputs is None or inputs.details.get("cause") != "not_standardized":
        return
    suspects = [n for n in SUSCEPTIBLE if n in results and results[n].status in ("warn", "fail")]
    if not suspects:
        return
    fixed_ctx = replace(ctx, inputs=standardized(ctx.inputs, inputs.details["standardize"]))
    try:
        again = rerun(fixed_ctx, suspects)
    except Exception:  # noqa: BLE001 - no counterfactual: the original messages stand, with a pointer
        again = {}
    cause = _summary(inputs)
    consequences, failed = [], False
    for name in suspects:
        r, new = results[name], again.get(name)
        r.details = {**r.details, "message_as_given": r.message}
        if new is not None and new.status == "pass":
            consequences.append(name)
            failed |= r.status == "fail"
            r.details["caused_by"] = "inputs"
            r.details["with_standardized_inputs"] = new.value
            r.message = (f"caused by the inputs, not by this check's usual suspects: {cause} - standardize them "
                         f"first. With the inputs standardized this check passes ({new.message})")
        else:
            r.message += f" (the inputs are not standardized either - {cause}: fix that first)"
    if consequences:
        inputs.details["consequences"] = consequences
        inputs.message += (f". Consequences: {', '.join(consequences)} "
                           f"{'fail' if failed else 'warn'} only because of it (they pass with standardized inputs)")
        if failed:
            inputs.status = "fail"


def annotate_consequences(report: HealthReport) -> HealthReport:
    """A run's merged report: the live checks that did not pass point at a flagged inputs check."""
    if "inputs" not in report:
        return report
    inputs = report["inputs"]
    if inputs.status not in ("warn", "fail") or inputs.details.get("cause") != "not_standardized":
        return report
    cause = _summary(inputs)
    out = []
    for c in report.checks:
        if c.name in LIVE_SUSCEPTIBLE and c.status in ("warn", "fail") and "caused_by" not in c.details \
                and "message_as_given" not in c.details:
            c = CheckResult(c.name, c.status, c.value, c.expected,
                            f"likely a consequence of the inputs ({cause}; see the inputs check): {c.message}",
                            {**c.details, "caused_by": "inputs (likely)"})
        out.append(c)
    return HealthReport(out)
