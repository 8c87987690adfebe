"""preflight(): seconds of checks on any model before a real run spends its budget (module named runner so
it does not shadow the function in `from sweeper.health import preflight`).

    from sweeper.health import preflight
    report = preflight(model, loss_fn, (inputs, targets),
                       optimizer_factory=lambda params: torch.optim.AdamW(params, lr=1e-3),
                       num_classes=vocab_size, sequence_dim=1)
    print(report); assert report.ok

The caller's model (parameters and buffers such as BatchNorm statistics), its .grad fields, its train/eval mode
and the global RNG streams are left as they were (training checks run on a deep copy, buffers are restored,
RNG is forked), so running preflight before a run does not change the run.

With more data it also checks the data and the evaluation (data_checks.py): pass `loader=` (the training
DataLoader, or any iterable of batches: its first `Thresholds.data_batches` batches are read) and
`val_data=` (a validation batch or loader) with `evaluate=` (your evaluation function).
"""
from __future__ import annotations

import math
import traceback
from typing import Any, Callable, Iterable

import torch
from torch import nn

from sweeper.health.checks.attribution import attribute_to_inputs
from sweeper.health.checks.dependence import batch_independence_check, causality_check, target_shift_check
from sweeper.health.checks.gradients import gradient_flow_check, init_loss_check, kernel_agreement_check
from sweeper.health.checks.training import training_checks
from sweeper.health.common.batching import call_model, map_tensors, split_batch, take_examples
from sweeper.health.common.context import (
    OptimizerFactory,
    PreflightContext,
    TrainStep,
    default_optimizer_factory,
    normalize_train_step,
    stepped_copy,
)
from sweeper.health.data_checks import (
    DATA_CHECKS,
    EVAL_CHECKS,
    data_hint,
    read_data,
    run_data_checks,
    run_eval_checks,
)
from sweeper.health.result import CheckResult, HealthReport
from sweeper.health.thresholds import DEFAULT_THRESHOLDS, Thresholds

CHECKS = ("init_loss", "gradient_flow", "overfit_batch", "param_movement", "update_ratio", "stale_grad",
          "batch_independence", "causality", "target_shift", "kernel_agreement") + DATA_CHECKS + EVAL_CHECKS
_TRAINING = ("overfit_batch", "param_movement", "update_ratio", "stale_grad")


def preflight(
    model: nn.Module,
    loss_fn: Callable[[Any, Any], torch.Tensor],
    batch: Any,
    *,
    optimizer_factory: OptimizerFactory | None = None,
    num_classes: int | None = None,
    sequence_dim: int | None = None,
    train_step: TrainStep | None = None,
    use_reference: Callable[[bool], Any] | None = None,
    skip: Iterable[str] = (),
    ignore: Iterable[str] = (),
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    seed: int = 0,
    loader: Iterable | None = None,
    val_data: Any = None,
    evaluate: Callable[..., Any] | None = None,
) -> HealthReport:
    """Run the preflight checks and return a HealthReport (print it for a table; `.ok`, `.to_json()`).

    model             any nn.Module; called as model(x), model(*x) or model(**x) for inputs x.
    loss_fn           loss_fn(outputs, targets) -> scalar tensor.
    batch             (inputs, targets); every tensor has the example index on dim 0. Use at least 4 examples.
    optimizer_factory called with the parameters of preflight's private model copy; default Adam(lr=1e-3).
    num_classes       for classification / token prediction: enables init_loss (vs ln C) and target_shift.
    sequence_dim      dim of the outputs (and inputs) along which the model is autoregressive (e.g. 1 for
                      (B, T, V) logits): enables causality and target_shift. Leave None for bidirectional models.
    train_step        your own step, train_step(model, batch, optimizer) -> loss (the common order; the older
                      train_step(model, optimizer, batch) is recognised by its parameter names); used by the
                      training checks instead of the textbook step, so bugs inside it (zero_grad) show.
    use_reference     use_reference(True) switches the model's custom kernels to their reference implementation,
                      use_reference(False) back: enables kernel_agreement.
    skip              check names to leave out (see CHECKS).
    ignore            fnmatch patterns of parameter names the gradient and movement checks leave alone.
    loader            the training DataLoader (or any iterable of batches like `batch`): its first
                      `thresholds.data_batches` batches feed the label histogram, the leak and probe checks and
                      class_mix (class-sorted data). Read with the global RNG forked and a loader's own generator
                      put back, so the run's data order does not move; `batch` may be its first batch.
    val_data          a validation batch, or an iterable of them (a DataLoader, a list): enables val_overlap
                      (examples shared with training, a loader over the training dataset), batchnorm_stats on
                      validation data, and the validation-vs-training input comparison.
    evaluate          your evaluation function: evaluate(model) (or evaluate(model, val_data), or evaluate() for a
                      closure over the model) -> a number or a dict of numbers. Called 2-3 times on the initial
                      weights (state and mode restored after each) by eval_determinism: keep it to a few batches.
                      The inputs it feeds the model in its first call are val_overlap's evidence.
    """
    skip = set(skip)
    unknown = skip - set(CHECKS)
    if unknown:
        raise ValueError(f"skip={sorted(unknown)}: unknown check; choose from {', '.join(CHECKS)}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if num_classes is not None and (not isinstance(num_classes, int) or num_classes < 2):
        raise ValueError(f"num_classes={num_classes!r}: expected an int >= 2 or None")
    if sequence_dim is not None and (not isinstance(sequence_dim, int) or sequence_dim < 1):
        raise ValueError(f"sequence_dim={sequence_dim!r}: expected an int >= 1 (dim 0 is the batch) or None")
    inputs, targets = split_batch(batch)
    if evaluate is not None and not callable(evaluate):
        raise TypeError(f"evaluate: expected a function evaluate(model) -> number or dict, got "
                        f"{type(evaluate).__name__}")
    devices = _cuda_devices(model)
    with torch.random.fork_rng(devices=devices):        # a shuffling loader draws from the global RNG
        data = read_data(loader, val_data, thresholds)
    ctx = PreflightContext(model=model, loss_fn=loss_fn, inputs=inputs, targets=targets,
                           optimizer_factory=optimizer_factory or default_optimizer_factory,
                           num_classes=num_classes, sequence_dim=sequence_dim,
                           train_step=None if train_step is None else normalize_train_step(train_step),
                           use_reference=use_reference, thresholds=thresholds, ignore=tuple(ignore), seed=seed,
                           evaluate=evaluate, **data)
    results: dict[str, CheckResult] = {}
    was_training = model.training
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}  # BatchNorm running stats...
    with torch.random.fork_rng(devices=devices):
        try:
            run_data_checks(ctx, results, skip, _guard)
            run_eval_checks(ctx, results, skip, _guard)         # before any train-mode forward moves BN stats
            if {"init_loss", "gradient_flow"} - skip:
                try:
                    loss_value, named_grads, noise = _init_backward(ctx)
                except RuntimeError as e:
                    hint = data_hint(e, results)
                    if not hint:
                        raise
                    raise RuntimeError(f"{e}. The data checks say: {hint}") from (e.__cause__ or e)
                _guard(results, ("init_loss",), lambda: [init_loss_check(ctx, loss_value, noise)])
                _guard(results, ("gradient_flow",),
                       lambda: [gradient_flow_check(ctx, named_grads, lambda: _grads_after_one_step(ctx))])
            if set(_TRAINING) - skip:
                _guard(results, _TRAINING, lambda: training_checks(ctx))
            for name, fn in (("batch_independence", batch_independence_check), ("causality", causality_check),
                             ("target_shift", target_shift_check), ("kernel_agreement", kernel_agreement_check)):
                if name not in skip:
                    _guard(results, (name,), lambda fn=fn: [fn(ctx)])
            attribute_to_inputs(ctx, results, lambda fixed, names: _rerun(fixed, names, skip))
        finally:
            model.train(was_training)
            with torch.no_grad():
                for name, b in model.named_buffers():
                    if name in buffers:
                        b.copy_(buffers[name])
    return HealthReport([results[name] for name in CHECKS if name in results and name not in skip])


def _rerun(ctx: PreflightContext, names: list[str], skip: set) -> dict[str, CheckResult]:
    """The given init/training checks again on another context (attribution.py: standardized inputs)."""
    out: dict[str, CheckResult] = {}
    if {"init_loss", "gradient_flow"} & set(names):
        loss_value, named_grads, noise = _init_backward(ctx)
        out["init_loss"] = init_loss_check(ctx, loss_value, noise)
        out["gradient_flow"] = gradient_flow_check(ctx, named_grads, lambda: _grads_after_one_step(ctx))
    if set(_TRAINING) & set(names):
        for r in training_checks(ctx):
            out[r.name] = r
    return {k: v for k, v in out.items() if k in names}


def _init_backward(ctx: PreflightContext) -> tuple[float, list, tuple[float, int]]:
    """One forward/backward in train mode at init. Errors here are the caller's model failing on its batch,
    so they propagate (with the check named) instead of becoming a report line."""
    named = ctx.params()
    if not named:
        raise ValueError("model has no trainable parameters (all requires_grad=False or ignored)")
    ctx.model.train()
    torch.manual_seed(ctx.seed)
    try:
        outputs = call_model(ctx.model, ctx.inputs)
        loss = ctx.loss_of(outputs)
    except Exception as e:
        raise RuntimeError(f"preflight: model/loss_fn failed on the batch: {type(e).__name__}: {e}") from e
    if not loss.requires_grad:
        raise RuntimeError("preflight: the loss does not require grad: the whole forward pass runs without autograd "
                           "(torch.no_grad, detach, or all parameters frozen)")
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    return float(loss.detach()), [(name, p, g) for (name, p), g in zip(named, grads)], _noise(ctx, outputs)


def _noise(ctx: PreflightContext, outputs: Any) -> tuple[float, int]:
    """Standard error of the batch loss from its per-example losses (0 when the loss cannot take one example):
    how far from ln(C) the initial loss may land by chance on this batch."""
    n = ctx.n
    try:
        with torch.no_grad():
            detached = map_tensors(outputs, lambda t: t.detach())
            per = torch.stack([ctx.loss_of(take_examples(detached, i, i + 1, n),
                                           take_examples(ctx.targets, i, i + 1, n)).double() for i in range(n)])
        return (float(per.std() / math.sqrt(n)), n) if n > 1 and torch.isfinite(per).all() else (0.0, 0)
    except Exception:  # noqa: BLE001 - a loss that needs the whole batch: fixed bands only
        return 0.0, 0


def _grads_after_one_step(ctx: PreflightContext) -> dict[str, torch.Tensor]:
    """Parameter gradients on a private copy after one textbook optimizer step on the batch ({} when that
    step cannot be taken, e.g. an optimizer that refuses sparse gradients): gradient_flow's second look."""
    try:
        model = stepped_copy(ctx)
        model.train()                     # the gradients as training sees them (dropout on)
        named = ctx.params(model)
        torch.manual_seed(ctx.seed)
        loss = ctx.loss_of(call_model(model, ctx.inputs))
        grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
        return {name: g for (name, _), g in zip(named, grads) if g is not None}
    except Exception:  # noqa: BLE001 - no second look: the step-0 verdict stands
        return {}


def _guard(results: dict[str, CheckResult], names: tuple[str, ...], run: Callable[[], list[CheckResult]]) -> None:
    """A check that cannot handle this model reports itself as "error" with the reason; the others still run."""
    try:
        for r in run():
            results[r.name] = r
    except Exception as e:  # noqa: BLE001 - reported, not swallowed
        where = _where(e)
        for name in names:
            results[name] = CheckResult(name, "error", None, "",
                                        f"check could not handle this model: {type(e).__name__}: {e}{where}; the "
                                        f"other checks ran. Skip it with skip=[{name!r}] if the model cannot "
                                        f"support it", {"error": f"{type(e).__name__}: {e}"})


def _where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    return f" (at {frames[-1].name}, {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""


def _cuda_devices(model: nn.Module) -> list[int]:
    return sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
