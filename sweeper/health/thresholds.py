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
    # loss's standard error from its per-example losses); see checks.gradients.init_loss_check.

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
    # (1-D biases and gains start at 0 or 1 and make the ratio meaningless). The checklist calls about 1e-3
    # healthy, 1e-5 and below barely learning: we warn below 3e-4 (half a decade under 1e-3), fail at or below
    # update_ratio_low_fail, and fail at >= 1, where each step replaces the weight wholesale and nothing learned
    # can accumulate (the learning-rate-kills-units regime). A matrix's ratio is its largest over the measured
    # steps, over the rows that moved (an embedding's rows of tokens absent from the batch do not count).
    movement_steps: int = 3
    update_ratio_low: float = 3e-4
    update_ratio_high: float = 0.3
    update_ratio_fail: float = 1.0

    # --- batch_independence / causality: gradient that leaks across examples or into the future, relative to the
    # gradient where it belongs. Exact independence gives 0.0; 1e-6 is ~10x float32 rounding of a sum.
    leak_tolerance: float = 1e-6
    # BatchNorm in train mode couples the examples of a batch through its statistics by design: "pass" names it
    # in the message (a BatchNorm MLP is healthy), "warn" flags it (a contrastive loss, where batch statistics
    # leak between the examples it compares), "fail" forbids it.
    batchnorm_coupling: str = "pass"

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

    # --- data checks (checks/inputs.py, checks/labels.py, checks/probe.py): what goes into the model.
    # inputs: the rms sqrt(mean^2 + std^2) of each input tensor (and feature/channel) as the first layer gets it.
    # Standardized data has rms 1; [0, 1] pixels ~0.4; raw 0-255 pixels ~140. A decade past 1 either way is where
    # a default init stops fitting the data (pre-activations 10x too large, or the signal 100x below the bias).
    input_scale_high: float = 10.0
    input_scale_low: float = 0.01
    input_offset_ratio: float = 3.0     # |mean| > 3 max(std, 1): the first layer sees mostly a constant offset
    val_shift_sigmas: float = 1.0       # validation mean this many training stds away: preprocessed differently
    val_scale_ratio: float = 3.0        # ... or its std this many times larger / smaller
    data_batches: int = 8               # batches read from `loader` and from `val_data`
    # labels: one class at >= 90% lets a constant prediction look good; classes "never seen" are only judged
    # where >= 10 examples of each were expected (a uniform class missing from 10 draws has chance e^-10).
    label_dominant_share: float = 0.9
    label_min_per_class_seen: float = 10.0
    target_share_warn: float = 0.05     # fewer than 5% of targets reaching the loss (masked LM uses ~15%)
    padding_in_loss: str = "warn"       # a sequence loss that counts the padding (pass: intended)
    ignored_real_class: str = "warn"    # per-example labels of a real class the loss ignores (pass: intended, e.g.
                                        # ignore_index for a "background" or "unlabelled" class)
    # class_weights: the spread of the per-class shares of the loss (frequency x the loss's measured weight) over
    # the spread of the frequencies alone. A rebalancing weight narrows it (inverse frequency: to 1x); weights that
    # rise with frequency widen it: 1.5x wider is beyond what measuring shares on a few hundred labels explains.
    class_weight_amplify: float = 1.5
    # data_coverage: the training loader draws on less than this share of its dataset (a Subset, a sampler, an
    # epoch that ends early) - a debug subset or limit left on. Real splits keep most of the data (train/val 80-90%);
    # a debug subset is a few percent. 0 silences the check (an intended subset, e.g. a learning-curve study).
    train_fraction_fail: float = 0.1
    # class_mix: chi-square homogeneity of the loader batches' class histograms; both the p-value (batch noise
    # ruled out) and the effect size (Cramer's V: 0 = same mix in every batch, 1 = one class per batch) must say so.
    class_mix_p: float = 1e-4
    class_mix_cramers_v: float = 0.5
    # feature_leak: a feature's spread within a class / between class means, with every two classes' values at
    # least 6 within-class stds apart. A label copied into the inputs gives exactly 0 (label + small noise a few
    # hundredths); real features that separate classes well still vary within a class (ratios of 0.1 and up).
    leak_within_ratio: float = 0.05
    leak_min_per_class: int = 8         # 8 examples per class before a class-constant value is more than chance
    # label_probe: (accuracy - majority rate) / (1 - majority rate) of a held-out ridge / nearest-neighbour probe;
    # warn when even its upper confidence bound (z = 2.33, one-sided 99%) is below 0.1 of the way to perfect.
    # Set probe_min_skill=0 to silence it for a task no simple probe can learn.
    probe_min_skill: float = 0.1
    probe_z: float = 2.33
    probe_max_examples: int = 1024      # pooled examples the probe and the leak check use at most
    probe_min_examples: int = 50        # fewer pooled examples than this (or 10 per class): the probe is not run,
    probe_min_per_class: int = 10       # a probe fitted on a handful of examples is at chance whatever the labels

    # --- evaluation checks (checks/eval.py): what val_data and evaluate make checkable.
    val_overlap_fail: float = 0.01      # estimated share of validation examples also in training: fail above
    val_overlap_min_share: float = 0.0  # ... pass at or below it (raise to accept an intended overlap)
    eval_rel_tol: float = 1e-5          # two evaluations of the same weights: float32 reordering stays below
    eval_train_mode: str = "fail"       # Dropout/BatchNorm in train mode inside evaluate (pass: MC dropout intended)
    train_eval_mode: str = "warn"       # training steps with the model in eval mode (pass: intended)
    # batchnorm_stats: running statistics vs the batch statistics they track, median over channels. Batch noise
    # of a few hundred values per channel is ~0.1 std; a distribution that moved is off by whole stds.
    bn_mean_z: float = 1.0
    bn_var_ratio: float = 4.0
    bn_calibration_steps: int = 50      # at most this many training batches calibrate a fresh layer (preflight)

    # --- issue 29 (live half): update/weight ratio bands as the debugging checklist states them (about 1e-3
    # healthy, about 1e-1 weights rewritten every step, 1e-5 and below barely learning). The preflight bands are
    # update_ratio_low / _high / _fail above (low raised to 3e-4 = half a decade under 1e-3: 1.2e-4 warns); the
    # high warn stays 0.3 there because Adam's first steps move each entry by about lr, lr/rms(W) ~ 0.05-0.1 on a
    # healthy small model. The live monitor judges each layer's MEDIAN ratio over the run (first sample skipped:
    # Adam's large first step), where the checklist's 1e-1 applies.
    update_ratio_low_fail: float = 1e-5     # preflight: a matrix at or below this per step barely learns: fail
    live_update_ratio_high: float = 0.1     # live: median above this, the weights are rewritten every step: warn
    live_update_ratio_low: float = 1e-5     # live: median at or below this, the layer barely learns: warn
    # --- learning-rate schedule (live, needs the optimizer): an lr at or below this share of its peak so far is
    # zero for training purposes (step-decay recipes bottom out at 1e-3 of the peak; a horizon in the wrong unit
    # gives exactly 0 or a cosine cycling through 0) ...
    lr_zero_fraction: float = 1e-4
    lr_zero_left_fraction: float = 0.1      # ... and it fails when more than this share of the run was left
    # --- retained autograd graph: a loss tensor's graph still alive this many steps after its step is being
    # kept by something (`total += loss`, a list of losses): a bounded window (deque of the last 50) passes.
    graph_retained_steps: int = 100
    # --- memory: resident memory (and CUDA memory allocated) sampled every interval. Growth from the first to
    # the last quarter of the run (after a 10% warm-up), in both halves, above max(MB, fraction of the early
    # level) is a leak; peak RSS above this share of the memory limit (cgroup or physical) is a warning.
    mem_growth_warn_mb: float = 100.0
    mem_growth_warn_fraction: float = 0.25
    mem_peak_warn_fraction: float = 0.8
    # --- the training curve (interval means of the loss the monitor sees, against the loss at step 0):
    trend_rise: float = 0.1             # ending >= 10% above the first loss: the loss rises (lr too big)
    trend_blowup: float = 3.0           # an interval mean >= 3x the first loss: it blew up on the way
    trend_flat: float = 0.05            # fell by < 5% of the first loss (or sits within stuck_tolerance of
                                        # ln C): flat (lr too small or model too small, by the update ratios)
    chance_above_factor: float = 1.25   # a loss above 1.25 ln C is "far above" chance (worse than uniform), not "at"
    # --- zero_grad_share judges dead units: weight-matrix rows with exactly zero gradient at this many interval
    # samples in a row (each on another batch: a sparse unit idle on one small batch is not dead).
    dead_window: int = 3
    # --- validation curves (run.log val_ keys or LiveMonitor.observe_eval):
    val_chance_tolerance: float = 0.05  # val loss never below (1 - 5%) ln C / val accuracy within 5 points of 1/C
    val_rise: float = 0.1               # val loss ending 10% above its minimum while train falls: overfitting
    val_shift_factor: float = 1.5       # val loss 1.5x the train loss early in learning: another distribution
    val_shift_early: float = 0.5        # ... judged at evaluations while the train loss is still above half its
                                        # first value (and below 1 - 4 trend_flat of it: learning has begun, no
                                        # memorising yet, whatever the epochs)
    curve_points: int = 512             # points kept per curve (pairs merge beyond: any run length, bounded)


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
