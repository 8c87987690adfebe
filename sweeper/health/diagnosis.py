"""One named diagnosis per run, by the debugging checklist's tree, from the checks in its health.json (pure Python).

    from sweeper.health.diagnosis import diagnose, read_diagnosis
    d = read_diagnosis(run_dir)        # {"name": "overfitting", "kind": "benign", "invalidates": False, "step": 1200,
                                       #  "check": "overfitting", "message": ..., "fix": ..., "evidence": [...]}
    d = diagnose(report.checks)        # the same from CheckResults (or their dicts)

The tree, top to bottom, the first level that finds something names the run (no skipping):
  0. what goes into the model: a failing data check (any check outside this package's own that names a
     `details["diagnosis"]`, e.g. inputs not standardized, train/val overlap) names its cause;
  1. init loss about ln C?            no -> init_or_last_layer_bug
  2. one batch overfits, the step is wired (gradients reach every parameter, no example mixing or causal leak,
     zero_grad called, the optimizer holds the model's parameters, the lr schedule lasts the run)?
                                      no -> cannot_overfit_one_batch, dead_gradients, batch_mixing, causal_leak,
                                            targets_not_shifted, kernel_bug, zero_grad_missing, params_not_trained,
                                            lr_schedule_ends_early
  3. train loss falls on the whole data?
                                      NaN -> diverged; rises / blew up / units died / weights rewritten -> lr_too_big;
                                      flat -> lr_too_small (update/weight ratios below healthy) or model_too_small
                                      (ratios healthy: the weights move but the loss stays at its floor)
  4. val loss falls too?              val at chance while train falls -> labels_do_not_match_inputs;
                                      val far above train from the start -> leak_or_shift;
                                      val rising while train falls -> overfitting (with the step it began);
                                      (all falling, but the live update/weight ratios out of band -> lr_too_big
                                      / lr_too_small)
  5. memory grows every step?         -> memory_growth
  else                                -> healthy
A warning-level data check (level 0) explains a later non-healthy finding instead (raw 0-255 pixels make the loss
blow up: the inputs are named, not the learning rate).

`kind` is healthy, benign (overfitting), tuning (lr, capacity, divergence: a legitimate if poor result), resource
(memory) or bug. `invalidates` is True exactly for bugs: the run's metrics do not measure the configuration it
claims to (the verdict treats its variant like a health-failed one).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from sweeper.health.result import HealthReport

KINDS = {
    "healthy": ("healthy", "nothing to fix: tune hyperparameters"),
    "overfitting": ("benign", "early stopping at the step it began, more data, weight decay, dropout, augmentation"),
    "diverged": ("tuning", "divide the learning rate by 3-10 or clip gradients; if it recurs at one step, look for "
                           "a log of 0 or a division by 0 on that batch"),
    "lr_too_big": ("tuning", "divide the learning rate by 3-10 (and clip gradients)"),
    "lr_too_small": ("tuning", "raise the learning rate (x3-x10) until the update/weight ratio is about 1e-3"),
    "model_too_small": ("tuning", "a bigger model: more width or depth, a nonlinearity between linear layers"),
    "not_learning": ("tuning", "give the monitor after_step (update ratios) to tell lr too small from model too small"),
    "memory_growth": ("resource", "accumulate loss.item() / .detach(), evaluate under torch.no_grad()"),
    "init_or_last_layer_bug": ("bug", "check the last layer's init scale, num_classes and the loss function"),
    "cannot_overfit_one_batch": ("bug", "the model, the loss or the optimizer step is broken: see overfit_batch"),
    "dead_gradients": ("bug", "reconnect the parameters that get no gradient (detach, no_grad, a blocking mask)"),
    "batch_mixing": ("bug", "use transpose/permute, not view/reshape, to move the batch axis"),
    "causal_leak": ("bug", "fix the causal mask so position t sees no later input"),
    "targets_not_shifted": ("bug", "shift targets by one position (inputs x[:, :-1], targets x[:, 1:])"),
    "kernel_bug": ("bug", "fix the custom kernel's backward (it disagrees with the reference)"),
    "zero_grad_missing": ("bug", "call optimizer.zero_grad() every step"),
    "params_not_trained": ("bug", "build the optimizer from the model's final parameters (layers created once)"),
    "lr_schedule_ends_early": ("bug", "give the schedule its horizon in optimizer steps (the run's total steps)"),
    "labels_do_not_match_inputs": ("bug", "shuffle one index for inputs and labels together; check a few pairs"),
    "leak_or_shift": ("bug", "build train and val with one pipeline from disjoint examples of one source"),
    "labels_wrapped": ("bug", "keep class ids in int64 (torch.long) from where they are stored to the loss"),
    "class_weights_inverted": ("bug", "weight each class by the inverse of its frequency (n / (C * count_c))"),
    "debug_subset": ("bug", "remove the debug subset / limit so the run trains on the whole training set"),
    "val_is_train": ("bug", "evaluate on the validation split (examples disjoint from training)"),
}

# preflight checks of the model/optimizer half and the live checks, by level; the diagnosis a failure names
_INIT = {"init_loss": "init_or_last_layer_bug"}
_WIRING = {"gradient_flow": "dead_gradients", "batch_independence": "batch_mixing", "causality": "causal_leak",
           "target_shift": "targets_not_shifted", "kernel_agreement": "kernel_bug", "stale_grad": "zero_grad_missing",
           "grad_accumulation": "zero_grad_missing", "param_movement": "params_not_trained",
           "optimizer_params": "params_not_trained", "overfit_batch": "cannot_overfit_one_batch",
           "lr_schedule": "lr_schedule_ends_early"}
_TRAINING = ("finite", "train_trend", "zero_grad_share", "update_ratio", "live_update_ratio", "loss_stuck",
             "grad_spike")
_VAL = ("val_at_chance", "val_shift", "overfitting")
_RESOURCES = ("graph_retained", "memory")
OWN = set(_INIT) | set(_WIRING) | set(_TRAINING) | set(_VAL) | set(_RESOURCES) | {"monitor", "preflight"}


def _as_dict(c: Any) -> dict[str, Any]:
    return c if isinstance(c, dict) else c.to_dict()


def _named(check: dict[str, Any]) -> str | None:
    """The diagnosis a non-passing check names: its details["diagnosis"], else by its name and figure."""
    d = (check.get("details") or {}).get("diagnosis")
    if d:
        return d
    name, status = check["name"], check["status"]
    if name == "finite" and status == "fail":
        return "diverged"
    if name == "zero_grad_share" and status == "warn":
        return "lr_too_big"
    if name in ("update_ratio", "live_update_ratio") and status == "fail":
        value = check.get("value")
        return "lr_too_big" if isinstance(value, (int, float)) and value >= 0.1 else "lr_too_small"
    return _INIT.get(name) or _WIRING.get(name)


def diagnose(checks: Iterable[Any]) -> dict[str, Any]:
    """The run's one diagnosis from its checks (CheckResult objects or their dicts), by the tree above."""
    checks = [_as_dict(c) for c in checks]
    bad = [c for c in checks if c["status"] in ("fail", "warn")]
    evidence = [f"{c['name']} {c['status']}: {c.get('message', '')}" for c in bad]
    data = [c for c in bad if c["name"] not in OWN and (c.get("details") or {}).get("diagnosis")]

    def pick(level: Iterable[str], statuses: tuple[str, ...]) -> dict[str, Any] | None:
        by_name = {c["name"]: c for c in checks}
        for name in level:
            c = by_name.get(name)
            if c is not None and c["status"] in statuses and _named(c):
                return c
        return None

    found = next((c for c in data if c["status"] == "fail"), None)
    found = found or pick(_INIT, ("fail",)) or pick(_WIRING, ("fail",))
    if found is None:
        found = pick(("finite", "train_trend", "zero_grad_share", "update_ratio", "live_update_ratio"),
                     ("fail", "warn"))
        if found is not None and found["name"] in ("update_ratio", "live_update_ratio") and found["status"] == "warn":
            found = None                                  # a ratio warning alone is evidence, not a diagnosis
        found = found or pick(("loss_stuck",), ("warn",))
    found = found or pick(_VAL, ("fail", "warn"))
    if found is None:                                     # the loss falls, val too: weights rewritten every step?
        ratio = next((c for c in checks if c["name"] == "live_update_ratio" and c["status"] == "warn"), None)
        if ratio is not None and isinstance(ratio.get("value"), (int, float)):
            found = {**ratio, "details": {**(ratio.get("details") or {}),
                                          "diagnosis": "lr_too_big" if ratio["value"] > 1e-3 else "lr_too_small"}}
    found = found or pick(_RESOURCES, ("warn",))
    if found is not None and data and KINDS.get(_named(found), ("bug",))[0] in ("tuning", "resource"):
        found = data[0]                                   # the inputs explain the symptom (level 0 first)
    if found is None:
        return _result("healthy", None, evidence,
                       "no check found a problem: the loss falls" + ("" if any(c["name"] in _VAL and c["status"] ==
                                                                             "pass" for c in checks)
                                                                     else " (no validation metrics to judge)"))
    return _result(_named(found), found, evidence, found.get("message", ""))


def _result(name: str, check: dict[str, Any] | None, evidence: list[str], message: str) -> dict[str, Any]:
    kind, fix = KINDS.get(name, ("bug", (check or {}).get("details", {}).get("fix") or "see the check's message"))
    details = (check or {}).get("details") or {}
    step = details.get("step")
    return {"name": name, "kind": kind, "invalidates": kind == "bug", "check": check and check["name"],
            "step": step if isinstance(step, int) else None, "message": message, "fix": fix, "evidence": evidence}


def read_diagnosis(run_dir: str | Path) -> dict[str, Any] | None:
    """The diagnosis of a run dir (or a health.json path): the one stored in health.json, else computed from its
    checks (older files). None when there is no health.json; ValueError naming the file when it is unreadable."""
    path = Path(run_dir)
    path = path / "health.json" if path.is_dir() else path
    if not path.exists():
        return None
    report = HealthReport.read(path)                 # the one reader of the format
    return report.diagnosis or diagnose(report.checks)
