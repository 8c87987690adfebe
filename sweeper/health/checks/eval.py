"""Validation as evidence: checks that need the validation data or the user's evaluation function.

(val_overlap, what evaluation reads against the training data, lives in checks/overlap.py; the first evaluate
call here records the inputs evaluate feeds the model for it.)
eval_determinism  the same weights evaluated twice must give the same numbers. Eval-mode forwards of the model
                  with two RNG states (a dropout applied regardless of mode: F.dropout without training=...); the
                  user's `evaluate` called twice on the same weights with hooks on every Dropout/BatchNorm layer
                  (one that runs in train mode during evaluation: model.eval() forgotten), and a third time to
                  tell randomness drawn from the global RNG (random validation subsets) from the rest.
(batchnorm_stats, the third evaluation check, lives in checks/batchnorm.py.)

ModeWatch         for a training loop: Dropout/BatchNorm layers found in eval mode during training steps (an
                  evaluation that left the model in eval mode).

    results = evaluation_checks(model, inputs, val_batches, evaluate, thresholds)   # RunHealth's entry
"""
from __future__ import annotations

import inspect
import math
from types import SimpleNamespace
from typing import Any, Callable

import torch
from torch import nn

from sweeper.health.common.batching import call_model, primary_output
from sweeper.health.common.data_sources import read_batches
from sweeper.health.common.eval_inputs import EvalInputs
from sweeper.health.result import CheckResult, name_list

_BN = nn.modules.batchnorm._BatchNorm


def mode_dependent(m: nn.Module) -> bool:
    """Layers whose output depends on train/eval mode."""
    if isinstance(m, nn.modules.dropout._DropoutNd):
        return m.p > 0
    if isinstance(m, _BN):
        return m.track_running_stats
    if isinstance(m, (nn.MultiheadAttention, nn.RNNBase)):
        return float(getattr(m, "dropout", 0) or 0) > 0
    return False


# ---- eval_determinism --------------------------------------------------------------------------------------------
def _numbers(result: Any, prefix: str = "") -> dict[str, float]:
    if torch.is_tensor(result):
        if result.numel() != 1:
            return {f"{prefix or 'value'}[sum]": float(result.detach().double().sum()),
                    f"{prefix or 'value'}[norm]": float(result.detach().double().norm())}
        return {prefix or "value": float(result.detach())}
    if isinstance(result, bool) or result is None:
        return {}
    if isinstance(result, (int, float)):
        return {prefix or "value": float(result)}
    if isinstance(result, dict):
        return {k: v for key, val in result.items() for k, v in _numbers(val, f"{prefix}{key}" if not prefix
                                                                           else f"{prefix}.{key}").items()}
    if isinstance(result, (tuple, list)):
        return {k: v for i, val in enumerate(result) for k, v in _numbers(val, f"{prefix}[{i}]").items()}
    try:
        return {prefix or "value": float(result)}
    except (TypeError, ValueError):
        return {}


def _rel_diff(a: dict[str, float], b: dict[str, float]) -> tuple[float, str]:
    worst, key = 0.0, ""
    for k in a:
        if k not in b:
            continue
        x, y = a[k], b[k]
        if math.isnan(x) and math.isnan(y):
            continue
        d = abs(x - y) / max(abs(x), abs(y), 1e-12) if math.isfinite(x) and math.isfinite(y) else \
            (0.0 if x == y else math.inf)
        if d > worst:
            worst, key = d, k
    return worst, key


def call_evaluate(evaluate: Callable, model: nn.Module, val_data: Any) -> Any:
    """evaluate() / evaluate(model) / evaluate(model, val_data), by how many parameters it requires."""
    try:
        params = [p for p in inspect.signature(evaluate).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = [None]
    if not params:
        return evaluate()
    if len(params) >= 2:
        return evaluate(model, val_data)
    return evaluate(model)


class _Snapshot:
    """The model's parameters, buffers and per-module modes, put back by restore()."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.state = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()
                      if torch.is_tensor(v)}
        self.modes = [(m, m.training) for m in model.modules()]

    def changed_buffers(self) -> list[str]:
        now = self.model.state_dict(keep_vars=True)
        names = {n for n, _ in self.model.named_buffers()}
        return [k for k in names if k in self.state and torch.is_tensor(now.get(k)) and
                not torch.equal(now[k].detach(), self.state[k])]

    def restore(self) -> None:
        with torch.no_grad():
            now = self.model.state_dict(keep_vars=True)
            for k, v in self.state.items():
                if torch.is_tensor(now.get(k)):
                    now[k].detach().copy_(v)
        for m, was in self.modes:
            m.training = was


def _eval_forward_random(model: nn.Module, inputs: Any, seed: int, tol: float) -> tuple[float, str | None]:
    """Relative difference of two eval-mode forwards under different RNG states (model mode restored)."""
    snap = _Snapshot(model)
    try:
        model.eval()
        with torch.no_grad():
            torch.manual_seed(seed + 101)
            a = primary_output(call_model(model, inputs)).detach().float()
            torch.manual_seed(seed + 202)
            b = primary_output(call_model(model, inputs)).detach().float()
    except Exception as e:  # noqa: BLE001 - an eval forward that fails is not this check's finding
        return 0.0, f"{type(e).__name__}: {e}"
    finally:
        snap.restore()
    if a.shape != b.shape:
        return math.inf, None
    scale = max(float(a.abs().max()) if a.numel() else 0.0, 1e-12)
    return float((a - b).abs().max()) / scale if a.numel() else 0.0, None


def eval_determinism_check(ctx) -> CheckResult:
    th = ctx.thresholds
    model = ctx.model
    inputs = ctx.val_batches[0][0] if ctx.val_batches else ctx.inputs
    details: dict[str, Any] = {}
    expected = f"relative difference <= {th.eval_rel_tol:g}"
    diff, error = _eval_forward_random(model, inputs, ctx.seed, th.eval_rel_tol)
    details["eval_forward_rel_diff"] = diff
    if error is None and diff > th.eval_rel_tol:
        return CheckResult("eval_determinism", "fail", diff, expected,
                           f"the model's eval-mode forward is random: two forwards of the same "
                           f"{'validation' if ctx.val_batches else 'training'} batch in eval mode differ by {diff:.2g} "
                           f"(relative): a dropout applied regardless of mode (F.dropout(x, p) without "
                           f"training=self.training, or a noise term without `if self.training`) - evaluation "
                           f"numbers jump from run to run", details)
    if ctx.evaluate is None:
        return CheckResult("eval_determinism", "pass", diff, expected,
                           f"two eval-mode forwards agree ({diff:.1g}); pass evaluate=<your evaluation function> to "
                           f"check the evaluation itself", details)
    return _evaluate_twice(ctx, model, details, expected)


def _evaluate_twice(ctx, model: nn.Module, details: dict, expected: str) -> CheckResult:
    th = ctx.thresholds
    deps = [(name, m) for name, m in model.named_modules() if mode_dependent(m)]
    in_train: dict[str, int] = {}
    calls = [0]

    def hook(name: str):
        def fn(module, args):
            calls[0] += 1
            if module.training:
                in_train[name] = in_train.get(name, 0) + 1
        return fn
    snap = _Snapshot(model)
    handles = [m.register_forward_pre_hook(hook(name)) for name, m in deps]
    results, left_training, updated = [], None, []
    try:
        for seed in (11, 12):
            torch.manual_seed(ctx.seed + seed)
            if seed == 11 and getattr(ctx, "eval_inputs", None) is None:
                with EvalInputs(ctx.thresholds.probe_max_examples) as seen:    # val_overlap's evidence
                    out = call_evaluate(ctx.evaluate, model, ctx.val_source)
                ctx.eval_inputs = seen
            else:
                out = call_evaluate(ctx.evaluate, model, ctx.val_source)
            results.append(_numbers(out))
            if left_training is None:
                left_training = model.training
                updated = snap.changed_buffers()
            snap.restore()
    finally:
        for h in handles:
            h.remove()
        snap.restore()
    a, b = results
    if not a:
        return CheckResult("eval_determinism", "skip", None, expected,
                           f"evaluate returned {type(out).__name__}, no number to compare (return a float or a dict "
                           f"of floats)", details)
    diff, key = _rel_diff(a, b)
    details.update(evaluate_rel_diff=diff, first=a, second=b, layers_in_train_mode=sorted(in_train),
                   buffers_updated=updated, leaves_training=left_training)
    shown = f"{key or 'value'} {a.get(key, next(iter(a.values()))):.6g} then {b.get(key, next(iter(b.values()))):.6g}"
    if in_train:
        bn = [n for n in in_train if isinstance(dict(deps)[n], _BN)]
        drop = [n for n in in_train if n not in bn]
        effects = []
        if drop:
            effects.append(f"dropout stays on ({name_list(drop, 3)})")
        if bn:
            effects.append("BatchNorm normalizes with each validation batch's own statistics"
                           + (" and overwrites its running statistics with validation data" if updated else "")
                           + f" ({name_list(bn, 3)})")
        status = th.eval_train_mode if th.eval_train_mode in ("warn", "fail") else "pass"
        msg = (f"evaluate runs {len(in_train)} layers in train mode: {'; '.join(effects)}"
               + (f"; the same weights evaluated twice give {shown}" if diff > th.eval_rel_tol else "")
               + ": model.eval() is missing before evaluation (and model.train() after it). If the train-mode "
                 "evaluation is intended (MC dropout), silence it with +health.thresholds.eval_train_mode=pass")
        return CheckResult("eval_determinism", status, diff, expected, msg, details)
    if diff > th.eval_rel_tol:
        torch.manual_seed(ctx.seed + 11)
        try:
            third = _numbers(call_evaluate(ctx.evaluate, model, ctx.val_source))
        finally:
            snap.restore()
        again, _ = _rel_diff(a, third)
        cause = ("it draws from the global RNG - random validation batches, or randomness in a custom layer: "
                 "evaluate a fixed validation set (or seed its own torch.Generator)" if again <= th.eval_rel_tol else
                 "not from the RNG: nondeterministic kernels (atomics on GPU) or state kept between calls")
        return CheckResult("eval_determinism", "warn", diff, expected,
                           f"the same weights evaluated twice give different numbers ({shown}, {diff:.2g} relative): "
                           f"{cause}; metrics then jump from run to run. Silence with "
                           f"+health.thresholds.eval_rel_tol=<larger>", details)
    note = ""
    if deps and calls[0] == 0:
        note = "; note: evaluate never ran this model's Dropout/BatchNorm layers (does it evaluate another model?)"
    elif deps and left_training is False:
        note = ("; evaluate leaves the model in eval mode: call model.train() before the next training step "
                "(the run's train_mode check watches for it)")
    return CheckResult("eval_determinism", "pass", diff, expected,
                       f"evaluate gives the same numbers twice on the same weights ({shown})" + note, details)


# ---- in a training loop ------------------------------------------------------------------------------------------
class ModeWatch:
    """Counts training steps during which the model (root module) is in eval mode although it has Dropout or
    BatchNorm layers; observe(step) after every backward costs one attribute read."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.has_deps = any(mode_dependent(m) for m in model.modules())
        self.steps = 0
        self.eval_steps = 0
        self.first: int | None = None

    def observe(self, step: int) -> None:
        if not self.has_deps:
            return
        self.steps += 1
        if not self.model.training:
            self.eval_steps += 1
            if self.first is None:
                self.first = step

    def result(self, th) -> CheckResult | None:
        if not self.has_deps or not self.steps:
            return None
        expected = "0 steps in eval mode"
        if self.eval_steps:
            status = th.train_eval_mode if th.train_eval_mode in ("warn", "fail") else "pass"
            return CheckResult("train_mode", status, self.eval_steps, expected,
                               f"the model was in eval mode during {self.eval_steps} of {self.steps} training steps "
                               f"(first at step {self.first}): dropout was off and BatchNorm stopped tracking - an "
                               f"evaluation's model.eval() was not undone; call model.train() before training steps",
                               {"first_step": self.first})
        return CheckResult("train_mode", "pass", 0, expected,
                           f"the model was in train mode in all {self.steps} training steps observed")

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "eval_steps": self.eval_steps, "first": self.first}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps, self.eval_steps, self.first = (state.get("steps", 0), state.get("eval_steps", 0),
                                                   state.get("first"))


def evaluation_checks(model: nn.Module, val_data: Any, evaluate: Callable | None, thresholds,
                      seed: int = 0) -> list[CheckResult]:
    """eval_determinism outside preflight (RunHealth at the start of a run): the model's eval-mode forward on
    the first validation batch and, with `evaluate`, the evaluation twice on the same weights. The model's
    state and mode and the global RNG are left as they were."""
    devices = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices):        # a shuffling loader draws from the global RNG
        val_batches, note = read_batches(val_data, max(int(thresholds.data_batches), 1)) if val_data is not None \
            else ([], "")
        if not val_batches and evaluate is None:
            return [CheckResult("eval_determinism", "skip", None, "",
                                f"not run: val_data could not be read ({note or 'no batch'})")]
        ctx = SimpleNamespace(model=model, thresholds=thresholds, val_batches=val_batches, seed=seed,
                              inputs=val_batches[0][0] if val_batches else None, evaluate=evaluate,
                              val_source=val_data, eval_inputs=False)     # no val_overlap here: nothing to record
        if ctx.inputs is None:             # evaluate only: no batch for the eval-forward comparison
            return [_evaluate_twice(ctx, model, {}, f"relative difference <= {thresholds.eval_rel_tol:g}")]
        return [eval_determinism_check(ctx)]
