"""Every threshold the health checks use, in one place, each with the reason for its value.

    from sweeper.health import Thresholds, preflight
    report = preflight(model, loss_fn, batch, thresholds=Thresholds(overfit_steps=300))

The values are not tuned to any test model; they come from what the quantity means:
- exact-zero tests (gradient flow, batch independence, causality) ask for zero: a dependency that should not exist
  gives exactly 0.0 in IEEE arithmetic (masked softmax weights underflow to 0, unused inputs get no gradient),
  so the tolerances only absorb rounding, far below any real leak;
- ratios (update/weight, gradient spikes) are judged on a log scale, warning half a decade outside the range
  practitioners treat as healthy and failing where the quantity stops making sense (an update larger than the
  weight it updates);
- loss bands are in nats relative to ln(num_classes), the loss of a uniform prediction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class Thresholds:
    # --- init_loss: L0 - ln(C) in nats. A model that predicts uniformly scores exactly ln(C); a random init whose
    # logits have std s scores about ln(C) + s^2/2 (targets independent of the prediction can only score worse than
    # uniform on average). Below ln(C) means the untrained model already predicts the targets: a leak or a wrong C.
    init_excess_warn: float = 1.0       # logits with std ~1.4 at init: too confident, early steps wasted
    init_excess_fail: float = 3.0       # e^3 = 20x less likely than uniform: init scale or loss is wrong
    init_deficit_warn: float = 0.25     # this far below ln(C) is beyond batch noise for batches of a few dozen
    init_deficit_fail: float = 1.0      # e times better than chance before training: targets leak into inputs
    # The deficit bands widen to what chance allows on a small batch (Student-t at 3 / 5 sigmas of the batch
    # loss's standard error from its per-example losses); see checks_gradients.init_loss_check.

    # --- overfit_batch: train on `overfit_examples` examples for up to `overfit_steps` steps. Progress is the share
    # of the gap still left between the loss of one output shared by all examples (the floor of a model that fits
    # nothing example-specific: the mean, the label frequencies) and the loss of the best separate output per
    # example (what a perfect memoriser reaches: 0 for plain CE/MSE, the target entropy under label smoothing),
    # both fitted directly on the outputs (loss_floors.py). The initial loss is no reference: a target offset
    # alone makes it large.
    overfit_steps: int = 100            # budget, always run in full; extended 50 steps at a time while the loss still falls ...
    overfit_max_steps: int = 1000       # ... up to this many steps
    overfit_max_seconds: float = 30.0   # ... or this much wall time
    overfit_examples: int = 4
    overfit_pass_fraction: float = 0.1  # pass with under 10% of the gap left: the examples are fitted individually
    overfit_fail_fraction: float = 0.5  # fail with over half left once the loss has stopped falling
    overfit_plateau: float = 0.02       # "stopped falling": last fifth of the session within 2% of the fifth before
    loss_pairing_gap: float = 0.05      # separate outputs per example beat a shared one by < 5%: the loss cannot
                                        # tell examples apart (a broadcast pairs every output with every target)

    # --- gradient_flow: a trainable parameter whose gradient is None, non-finite or exactly zero fails.
    dead_rows_warn_fraction: float = 0.5      # >= half the output rows of a matrix get exactly zero gradient
    grad_rms_ratio_low: float = 1e-4          # matrix grad rms vs the median over parameters: vanishing
    grad_rms_ratio_high: float = 1e4          # ... or exploding

    # --- param_movement / update_ratio: ||W_k - W_{k-1}|| / ||W_{k-1}|| per optimizer step, matrices only
    # (1-D biases and gains start at 0 or 1 and make the ratio meaningless). Karpathy's healthy band is about
    # 1e-5..1e-1 (1e-3 typical); we warn half a decade outside it and fail at >= 1, where each step replaces the
    # weight wholesale and nothing learned can accumulate (the learning-rate-kills-units regime).
    movement_steps: int = 3
    update_ratio_low: float = 3e-6
    update_ratio_high: float = 0.3
    update_ratio_fail: float = 1.0

    # --- batch_independence / causality: gradient that leaks across examples or into the future, relative to the
    # gradient where it belongs. Exact independence gives 0.0; 1e-6 is ~10x float32 rounding of a sum.
    leak_tolerance: float = 1e-6
    # BatchNorm in train mode couples the examples of a batch through its statistics by design: "warn" names it
    # (the batch is not i.i.d. for the loss), "pass" accepts it (intended), "fail" forbids it.
    batchnorm_coupling: str = "warn"

    # --- target_shift: share of positions whose target equals the input token at the SAME position.
    target_copy_fail: float = 0.9

    # --- kernel_agreement: relative L2 difference of each parameter's gradient, custom kernel vs reference.
    # Same math in a different order differs by a few float32 ulps times sqrt(depth); 1e-3 is ~1e4 ulps.
    kernel_rel_tol_fp32: float = 1e-3
    kernel_rel_tol_low_precision: float = 3e-2  # bf16/fp16 parameters (8-bit / 11-bit mantissas)

    # --- live monitor
    spike_factor: float = 10.0          # grad norm above 10x its running median is a spike
    spike_min_history: int = 5          # need this many interval observations before judging spikes
    stuck_tolerance: float = 0.02       # loss EMA within 2% of ln(V) means the model still predicts uniform
    stuck_min_steps: int = 200          # ... judged only once this many steps have run
    dead_share_warn: float = 0.5        # half the gradient entries alive at the first check are now exactly zero
    ema_beta: float = 0.98              # loss moving average: about 50 steps of memory


    @classmethod
    def from_dict(cls, values: Mapping[str, Any], prefix: str = "health.thresholds") -> "Thresholds":
        """Thresholds with `values` replacing the defaults (the health.thresholds config keys). An unknown key or
        a value of the wrong type is a ValueError naming the key and what is accepted."""
        known = {f.name: f for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, value in dict(values or {}).items():
            if key not in known:
                raise ValueError(f"{prefix}.{key}: unknown threshold; accepted: {', '.join(sorted(known))}")
            default = getattr(DEFAULT_THRESHOLDS, key)
            if isinstance(default, str):
                if value not in ("pass", "warn", "fail"):
                    raise ValueError(f"{prefix}.{key}={value!r}: expected pass, warn or fail")
                changes[key] = value
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                    (isinstance(default, int) and float(value) != int(value)) or value < 0:
                raise ValueError(f"{prefix}.{key}={value!r}: expected a finite number >= 0"
                                 + (" (a whole number)" if isinstance(default, int) else ""))
            else:
                changes[key] = int(value) if isinstance(default, int) else float(value)
        return replace(DEFAULT_THRESHOLDS, **changes)


DEFAULT_THRESHOLDS = Thresholds()
