"""The data and evaluation half of preflight (runner.preflight calls these): which checks, in what order, fed by
what; and the explanation added to a model/loss that refuses its batch.

    fields = read_data(loader, val_data, thresholds)        # PreflightContext fields: loader/val batches, notes
    run_data_checks(ctx, results, skip, guard)              # inputs, labels, target_share, class_weights, ...
    run_eval_checks(ctx, results, skip, guard)              # val_overlap, eval_determinism, batchnorm_stats
"""
from __future__ import annotations

import re
from typing import Any, Callable

from sweeper.health.checks.batchnorm import batchnorm_stats_check
from sweeper.health.checks.class_weights import class_weights_check
from sweeper.health.checks.coverage import data_coverage_check
from sweeper.health.checks.eval import eval_determinism_check
from sweeper.health.checks.inputs import inputs_check, trace_forward
from sweeper.health.checks.labels import class_mix_check, labels_check, target_share_check
from sweeper.health.checks.overlap import val_overlap_check
from sweeper.health.checks.probe import Examples, feature_leak_check, label_probe_check
from sweeper.health.common.data_sources import dataset_size, read_batches
from sweeper.health.result import CheckResult

DATA_CHECKS = ("inputs", "labels", "target_share", "class_weights", "feature_leak", "label_probe", "class_mix",
               "data_coverage")
EVAL_CHECKS = ("val_overlap", "eval_determinism", "batchnorm_stats")

Guard = Callable[[dict, tuple, Callable[[], list[CheckResult]]], None]


def read_data(loader: Any, val_data: Any, thresholds) -> dict[str, Any]:
    """The PreflightContext fields the data checks read. Call inside the caller's forked RNG: a shuffling
    DataLoader draws its order from the global RNG."""
    limit = max(int(thresholds.data_batches), 1)
    loader_batches, loader_note = read_batches(loader, limit) if loader is not None else ([], "")
    val_batches, val_note = read_batches(val_data, limit) if val_data is not None else ([], "")
    notes = {k: v for k, v in (("loader", loader_note), ("val_data", val_note)) if v}
    return {"loader_batches": loader_batches, "val_batches": val_batches, "val_source": val_data,
            "loader_source": loader,
            "train_size": dataset_size(loader) if loader is not None else None, "data_notes": notes}


def run_data_checks(ctx, results: dict[str, CheckResult], skip: set, guard: Guard) -> None:
    wanted = [n for n in DATA_CHECKS if n not in skip]
    if not wanted:
        return
    state: dict[str, Any] = {}

    def inputs() -> list[CheckResult]:
        result, state["trace"] = inputs_check(ctx)
        return [result]
    guard(results, ("inputs",), inputs)
    trace = state.get("trace")
    if trace is None:
        trace = trace_forward(ctx.model, ctx.inputs)
    share: dict[str, Any] = {}
    if "class_mix" in wanted or "labels" in wanted:
        guard(results, ("class_mix",), lambda: [class_mix_check(ctx)])
        share["class_mix"] = results.get("class_mix")
    if {"target_share", "class_weights", "labels"} & set(wanted):
        guard(results, ("target_share",), lambda: [target_share_check(ctx, trace, share)])
        guard(results, ("class_weights",), lambda: [class_weights_check(ctx, trace, share)])
        guard(results, ("labels",), lambda: [labels_check(ctx, trace, share)])
    if {"feature_leak", "label_probe"} & set(wanted):
        def probes() -> list[CheckResult]:
            ex = Examples(ctx)
            return [feature_leak_check(ctx, ex), label_probe_check(ctx, ex)]
        guard(results, ("feature_leak", "label_probe"), probes)
    if "data_coverage" in wanted:
        guard(results, ("data_coverage",), lambda: [data_coverage_check(ctx)])
    for name in DATA_CHECKS:
        if name in skip:
            results.pop(name, None)


def run_eval_checks(ctx, results: dict[str, CheckResult], skip: set, guard: Guard) -> None:
    # eval_determinism first: its first evaluate call records what evaluate feeds the model, val_overlap's evidence
    for name, fn in (("eval_determinism", eval_determinism_check), ("val_overlap", val_overlap_check),
                     ("batchnorm_stats", batchnorm_stats_check)):
        if name not in skip:
            guard(results, (name,), lambda fn=fn: [fn(ctx)])


def data_hint(error: BaseException, results: dict[str, CheckResult]) -> str:
    """What the data checks know about a model/loss that failed on the batch (e.g. float class indices)."""
    text = f"{type(error).__name__}: {error} {error.__cause__ or ''}"
    parts = []
    labels = results.get("labels")
    if labels is not None and labels.status == "fail":
        parts.append(labels.message)
    hints = labels.details.get("hint", {}) if labels is not None else {}
    if re.search(r"(?i)expected (scalar type |target dtype to be )?(Long|Int64)", text):
        parts.append(hints.get("long", ""))
    elif re.search(r"(?i)expected (scalar type )?(Float|Double|Half)|desired output type (Long|Int)|"
                   r"found dtype (Long|Int)", text):
        parts.append(hints.get("float", ""))
    if re.search(r"(?i)multi-target|0D or 1D|1D target|shape|size", text):
        parts.append(hints.get("shape", ""))
    inputs = results.get("inputs")
    if inputs is not None and inputs.status == "fail":
        parts.append(inputs.message)
    return "; ".join(dict.fromkeys(p for p in parts if p))
