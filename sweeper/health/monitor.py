"""LiveMonitor: cheap health monitoring inside a training loop.

    monitor = LiveMonitor(model, interval=50, num_classes=vocab_size)
    for step in ...:
        loss.backward()
        metrics.update(monitor.after_backward(step, loss, grad_norm=total_norm_or_None))
        optimizer.step()
        metrics.update(monitor.after_step(step))
        if monitor.diverged: ...stop; status "diverged"; monitor.diverged = {"step", "reason"}
    monitor.report().write(run_dir / "health.json")

`step` is the 0-based index of the update (the number of updates done before it). Every step costs one scalar
read of the loss (and of grad_norm when given, e.g. the pre-clipping norm clip_grad_norm_ returns): a NaN/inf
there marks the run diverged at that step. On the last update of every `interval` (step + 1 a multiple of it,
so the figures belong in the log line written after the update) the monitor also measures
per-layer gradient norms, the share of gradient entries that are exactly zero, and per-layer update/weight
ratios (snapshot before optimizer.step, compare after), and judges grad-norm spikes and a loss stuck at ln(V).
The metrics it returns use flat `health/...` keys (per-layer values as {layer: value} dicts) and include
`health/warning` on the step a new warning appears, so whoever tails the run's metrics can print it as it happens.
Per-layer gradient-norm shares go out as flat scalars `health/grad_share/LAYER` (each layer's share of the
squared gradient norm; they sum to 1), which the report draws as the gradient-flow heatmap.

A closed training step (one call that does zero_grad, backward and step) cannot offer a place between backward
and step; attach through hooks instead:

    monitor = LiveMonitor(model, interval=50).attach(optimizer)   # grad hooks + optimizer step hooks
    for step in ...:
        loss = train_step(model, batch, optimizer)                # yours, untouched
        monitor.observe_loss(loss)                                # optional: the loss checks
        metrics.update(monitor.take_metrics())
    monitor.detach()

The monitor never raises into a training run: a measurement that fails on this model (an exotic gradient
layout, say) is recorded once as a "monitor" check with status "error" and the run goes on. Sparse gradients
(nn.Embedding(sparse=True)) are measured on their stored values.
"""
from __future__ import annotations

import math
from collections import deque
from typing import Any

import torch
from torch import nn

from .batching import grad_values
from .result import CheckResult, HealthReport
from .thresholds import DEFAULT_THRESHOLDS, Thresholds


def _layer(param_name: str) -> str:
    return param_name.rsplit(".", 1)[0] if "." in param_name else param_name


class LiveMonitor:
    def __init__(self, model: nn.Module, *, interval: int = 50, num_classes: int | None = None,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS, per_layer: bool = True):
        if not isinstance(interval, int) or interval < 1:
            raise ValueError(f"interval={interval!r}: expected an int >= 1 (steps between health measurements)")
        self.named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.interval = interval
        self.num_classes = num_classes
        self.th = thresholds
        self.per_layer = per_layer
        self.diverged: dict[str, Any] | None = None
        self.steps_seen = 0
        self.loss_ema: float | None = None
        self._ema_raw = 0.0
        self._ema_weight = 0.0
        self._norms: deque[float] = deque(maxlen=50)
        self.spikes: list[dict[str, float]] = []
        self.zero_share_first: tuple[int, float] | None = None
        self.zero_share_last: tuple[int, float] | None = None
        self.zero_share_warned = False
        self.stuck_since: int | None = None
        self.stuck_last: bool | None = None
        self._before: dict[str, torch.Tensor] | None = None
        self.error: str | None = None              # first measurement that failed on this model
        self._hooks: list[Any] = []
        self._hook_step = 0
        self._hook_loss: Any = None
        self._grad_flags: list[tuple[str, torch.Tensor]] = []
        self.pending: dict[str, Any] = {}

    # ---- hooks: for a closed training step ------------------------------------------------------------------
    def attach(self, optimizer: torch.optim.Optimizer | None = None) -> "LiveMonitor":
        """Watch through hooks: every parameter's post-accumulate-grad hook records whether its gradient is
        finite (no host sync); with `optimizer`, its step pre-hook runs after_backward and its post-hook
        after_step, counting steps itself. Metrics collect in `take_metrics()`."""
        self.detach()
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad(name)) for name, p in self.named]
        if optimizer is not None:
            self._hooks.append(optimizer.register_step_pre_hook(lambda opt, args, kwargs: self._pre_step()))
            self._hooks.append(optimizer.register_step_post_hook(lambda opt, args, kwargs: self._post_step()))
        return self

    def detach(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def observe_loss(self, loss: Any) -> None:
        """The loss of the step that just ran (hooks mode): a NaN/inf marks the run diverged."""
        self._guarded(self._observe_loss, loss)

    def take_metrics(self) -> dict[str, Any]:
        """Hooks mode: the metrics measured since the last call (empty off interval steps)."""
        self._guarded(self._check_flags, max(self._hook_step - 1, 0))
        out, self.pending = self.pending, {}
        return out

    def _on_grad(self, name: str):
        def hook(p):
            try:
                if p.grad is not None:
                    self._grad_flags.append((name, torch.isfinite(grad_values(p.grad)).all()))
            except Exception as e:  # noqa: BLE001 - never into the backward pass
                self._record_error(e)
        return hook

    def _check_flags(self, step: int) -> None:
        flags, self._grad_flags = self._grad_flags, []
        if flags and not bool(torch.stack([f for _, f in flags]).all()):
            first = next(name for name, f in flags if not bool(f))
            self._diverge(step, f"gradient of {first} is non-finite")
            self.pending["health/diverged"] = True

    def _observe_loss(self, loss: Any) -> None:
        value = float(loss.detach() if torch.is_tensor(loss) else loss)
        if not math.isfinite(value):
            self._diverge(max(self._hook_step - 1, 0), f"loss is {value}")
            self.pending["health/diverged"] = True

    def _pre_step(self) -> None:
        self._guarded(self._check_flags, self._hook_step)
        self.pending.update(self.after_backward(self._hook_step, None))

    def _post_step(self) -> None:
        self.pending.update(self.after_step(self._hook_step))
        self._hook_step += 1

    # ---- never raise into the run ---------------------------------------------------------------------------
    def _record_error(self, e: BaseException) -> dict[str, Any]:
        if self.error is None:
            self.error = f"{type(e).__name__}: {e}"
            return {"health/warning": f"health monitor could not measure this model ({self.error}); "
                                      f"training goes on"}
        return {}

    def _guarded(self, fn, *args) -> dict[str, Any]:
        try:
            return fn(*args) or {}
        except Exception as e:  # noqa: BLE001 - recorded as the "monitor" error check
            return self._record_error(e)

    # ---- per step -------------------------------------------------------------------------------------------
    def is_interval(self, step: int) -> bool:
        """`step` is the 0-based index of the update (= updates done before it); measuring on the last update of
        each interval puts the figures in the log line written after it, at step count step + 1."""
        return (step + 1) % self.interval == 0

    def after_backward(self, step: int, loss: Any, grad_norm: Any = None) -> dict[str, Any]:
        """Call after loss.backward(), before optimizer.step(). Returns health metrics on interval steps.
        `loss` may be None (hooks mode without observe_loss). Never raises."""
        return self._guarded(self._after_backward, step, loss, grad_norm)

    def _after_backward(self, step: int, loss: Any, grad_norm: Any = None) -> dict[str, Any]:
        self.steps_seen += 1
        if loss is not None:
            loss_value = float(loss.detach() if torch.is_tensor(loss) else loss)
            if not math.isfinite(loss_value):
                self._diverge(step, f"loss is {loss_value}")
                return {"health/diverged": True}
            self._update_ema(loss_value)
        gn = None if grad_norm is None else float(grad_norm)   # one host read of a tensor norm, not two
        if gn is not None:
            if not math.isfinite(gn):
                self._diverge(step, f"gradient norm is {gn}{self._first_nonfinite_grad()}")
                return {"health/diverged": True}
            if not self.is_interval(step):
                self._spike(step, gn)
        if self.zero_share_first is None:   # baseline on the very first update, before any unit could die
            share = self._zero_share_now()
            if share is not None:
                self.zero_share_first = (step, share)
        if not self.is_interval(step):
            return {}
        return self._measure_gradients(step, gn)

    def after_step(self, step: int) -> dict[str, Any]:
        """Call after optimizer.step(). Returns update/weight ratios on interval steps. Never raises."""
        return self._guarded(self._after_step, step)

    def _after_step(self, step: int) -> dict[str, Any]:
        if self._before is None or not self.is_interval(step):
            return {}
        pairs = [(name, p.detach(), self._before[name]) for name, p in self.named if name in self._before]
        with torch.no_grad():   # two foreach kernels and one host copy, not two syncs per matrix
            old_norms = torch._foreach_norm([old for _, _, old in pairs])
            step_norms = torch._foreach_norm(torch._foreach_sub([new for _, new, _ in pairs],
                                                                [old for _, _, old in pairs]))
            figures = torch.stack([torch.stack(old_norms), torch.stack(step_norms)]).double().cpu().tolist()
        sums: dict[str, list[float]] = {}     # layer -> [sum ||W||^2, sum ||dW||^2] over its matrices
        for (name, _, _), w, d in zip(pairs, *figures):
            acc = sums.setdefault(_layer(name) if self.per_layer else name, [0.0, 0.0])
            acc[0] += w * w
            acc[1] += d * d
        ratios = {k: math.sqrt(d2 / w2) for k, (w2, d2) in sums.items() if w2 > 0}
        self._before = None
        if not ratios:
            return {}
        finite = [r for r in ratios.values() if math.isfinite(r)]
        out: dict[str, Any] = {"health/update_ratio_max": max(finite) if finite else float("nan")}
        if self.per_layer:
            out["health/layer_update_ratio"] = ratios
        if len(finite) < len(ratios):
            self._diverge(step, "parameters became non-finite after optimizer.step()")
            out["health/diverged"] = True
        return out

    def observe_eval(self, step: int, val_loss: Any) -> None:
        value = float(val_loss.detach() if torch.is_tensor(val_loss) else val_loss)
        if not math.isfinite(value):
            self._diverge(step, f"validation loss is {value}")

    # ---- interval measurements ------------------------------------------------------------------------------
    def _measure_gradients(self, step: int, given_norm: float | None) -> dict[str, Any]:
        """given_norm: the caller's (pre-clipping) norm; spikes are judged on it when given, so the history
        holds one kind of figure even when the grads are clipped before this call."""
        grads = [(n, p.grad) for n, p in self.named if p.grad is not None]
        out: dict[str, Any] = {"health/loss_ema": self.loss_ema}
        stuck = self._stuck(step)
        if not grads:
            if stuck:
                out["health/warning"] = stuck
            return out
        with torch.no_grad():
            norms = torch.stack(torch._foreach_norm([grad_values(g) for _, g in grads])).double().cpu()
        share = self._zero_share_now()
        global_norm = float(norms.pow(2).sum().sqrt())
        if not math.isfinite(global_norm):
            self._diverge(step, f"gradient norm is {global_norm}{self._first_nonfinite_grad()}")
            out["health/diverged"] = True
            return out
        if given_norm is None:          # else the caller logs its own (pre-clipping) norm
            out["health/grad_norm"] = global_norm
        out["health/zero_grad_share"] = share
        if self.per_layer:
            layer_sq: dict[str, float] = {}
            for (name, _), nrm in zip(grads, norms.tolist()):
                layer_sq[_layer(name)] = layer_sq.get(_layer(name), 0.0) + nrm * nrm
            out["health/layer_grad_norm"] = {k: math.sqrt(v) for k, v in layer_sq.items()}
            total_sq = sum(layer_sq.values())
            for k, v in layer_sq.items():        # flat scalars: the report's gradient-flow heatmap reads them
                out[f"health/grad_share/{k}"] = v / total_sq if total_sq > 0 else 0.0
        # snapshot the matrices so after_step can measure the update/weight ratio of this step
        self._before = {n: p.detach().clone() for n, p in self.named if p.dim() >= 2}
        warnings = [w for w in (self._spike(step, global_norm if given_norm is None else given_norm), self._zero_share(step, share), stuck) if w]
        if warnings:
            out["health/warning"] = "; ".join(warnings)
        return out

    def _zero_share_now(self) -> float | None:
        """Share of all trainable entries whose gradient is exactly zero (a missing .grad counts as zero)."""
        if not any(p.grad is not None for _, p in self.named):
            return None
        with torch.no_grad():   # one host sync for all parameters; a sparse gradient's absent rows are zeros
            stored = [grad_values(p.grad) for _, p in self.named if p.grad is not None]
            nonzero = int(torch.stack([torch.count_nonzero(v) for v in stored]).sum())
            zeros = sum(p.numel() for _, p in self.named) - nonzero
        return zeros / max(sum(p.numel() for _, p in self.named), 1)

    def _spike(self, step: int, norm: float) -> str | None:
        history = sorted(self._norms)
        self._norms.append(norm)
        if len(history) < self.th.spike_min_history:
            return None
        median = history[len(history) // 2]
        if median > 0 and norm > self.th.spike_factor * median:
            self.spikes.append({"step": step, "grad_norm": norm, "median": median})
            return f"grad-norm spike at step {step}: {norm:.3g} = {norm / median:.0f}x the running median {median:.3g}"
        return None

    def _zero_share(self, step: int, share: float) -> str | None:
        if self.zero_share_first is None:
            self.zero_share_first = (step, share)
        self.zero_share_last = (step, share)
        if self._died(share) >= self.th.dead_share_warn and not self.zero_share_warned:
            self.zero_share_warned = True
            return (f"share of exactly-zero gradient entries rose from {self.zero_share_first[1]:.1%} to {share:.1%} "
                    f"by step {step}: units are dying (learning rate too high?)")
        return None

    def _died(self, share: float) -> float:
        """Of the gradient entries that were nonzero at the first check, the fraction now exactly zero."""
        first = self.zero_share_first[1]
        return (share - first) / (1 - first) if first < 1 else 0.0

    def _stuck(self, step: int) -> str | None:
        if self.num_classes is None or self.loss_ema is None or step < self.th.stuck_min_steps:
            return None
        chance = math.log(self.num_classes)
        stuck = self.loss_ema >= chance * (1 - self.th.stuck_tolerance)
        first = stuck and self.stuck_since is None
        if first:
            self.stuck_since = step
        self.stuck_last = stuck
        if first:
            return (f"loss stuck at ln({self.num_classes}) = {chance:.3f} at step {step} (EMA {self.loss_ema:.3f}): "
                    f"the model still predicts uniformly")
        return None

    def _update_ema(self, value: float) -> None:
        b = self.th.ema_beta
        self._ema_raw = b * self._ema_raw + (1 - b) * value
        self._ema_weight = b * self._ema_weight + (1 - b)       # = 1 - b^k: bias correction, like Adam's moments
        self.loss_ema = self._ema_raw / self._ema_weight

    def _first_nonfinite_grad(self) -> str:
        for name, p in self.named:
            if p.grad is not None and not bool(torch.isfinite(grad_values(p.grad)).all()):
                return f" (first non-finite: {name}.grad)"
        return ""

    def _diverge(self, step: int, reason: str) -> None:
        if self.diverged is None:
            self.diverged = {"step": step, "reason": reason}

    # ---- verdict --------------------------------------------------------------------------------------------
    def report(self) -> HealthReport:
        checks = []
        if self.diverged:
            ckpt = self.diverged.get("last_good_checkpoint")
            checks.append(CheckResult("finite", "fail", self.diverged["step"], "no NaN/inf",
                                      f"diverged at step {self.diverged['step']}: {self.diverged['reason']}"
                                      + (f"; last good checkpoint: step {ckpt}" if ckpt is not None else ""),
                                      dict(self.diverged)))
        else:
            checks.append(CheckResult("finite", "pass", None, "no NaN/inf",
                                      f"loss and gradients finite over {self.steps_seen} steps"))
        if self.spikes:
            big = max(self.spikes, key=lambda s: s["grad_norm"] / s["median"])
            checks.append(CheckResult("grad_spike", "warn", big["grad_norm"] / big["median"],
                                      f"< {self.th.spike_factor:g}x running median",
                                      f"{len(self.spikes)} grad-norm spikes; largest at step {int(big['step'])}: "
                                      f"{big['grad_norm']:.3g} vs median {big['median']:.3g} (lr too high for this "
                                      f"stage, a bad batch, or missing clipping)", {"spikes": self.spikes}))
        else:
            checks.append(CheckResult("grad_spike", "pass", None, f"< {self.th.spike_factor:g}x running median",
                                      "no grad-norm spikes"))
        checks.append(self._stuck_result())
        checks.append(self._zero_share_result())
        if self.error:
            checks.append(CheckResult("monitor", "error", None, "",
                                      f"the live monitor could not measure this model ({self.error}); training went "
                                      f"on, the other monitor checks cover the steps before it", {"error": self.error}))
        return HealthReport(checks)

    def _stuck_result(self) -> CheckResult:
        if self.num_classes is None:
            return CheckResult("loss_stuck", "skip", None, "", "num_classes not given")
        chance = math.log(self.num_classes)
        expected = f"EMA < {chance * (1 - self.th.stuck_tolerance):.3f} after step {self.th.stuck_min_steps}"
        if self.stuck_last:
            return CheckResult("loss_stuck", "warn", self.loss_ema, expected,
                               f"loss EMA {self.loss_ema:.3f} still at ln({self.num_classes}) = {chance:.3f} since step "
                               f"{self.stuck_since}: no learning signal (lr 0, dead gradients, labels unrelated to "
                               f"inputs)")
        if self.stuck_since is not None:
            return CheckResult("loss_stuck", "pass", self.loss_ema, expected,
                               f"loss sat at ln({self.num_classes}) at step {self.stuck_since}, then fell")
        if self.stuck_last is None:
            return CheckResult("loss_stuck", "skip", self.loss_ema, expected,
                               f"run too short to judge (< {self.th.stuck_min_steps} steps)")
        return CheckResult("loss_stuck", "pass", self.loss_ema, expected,
                           f"loss EMA {self.loss_ema:.3f} below ln({self.num_classes}) = {chance:.3f}")

    def _zero_share_result(self) -> CheckResult:
        expected = f"< {self.th.dead_share_warn:.0%} of live entries die"
        if self.zero_share_first is None:
            return CheckResult("zero_grad_share", "skip", None, expected, "no interval step observed")
        (s0, a), (s1, b) = self.zero_share_first, self.zero_share_last or self.zero_share_first
        if self.zero_share_warned:
            return CheckResult("zero_grad_share", "warn", self._died(b), expected,
                               f"share of exactly-zero gradient entries rose from {a:.1%} (step {s0}) to {b:.1%} "
                               f"(step {s1}): dead units, typically a learning rate so high that ReLUs die")
        return CheckResult("zero_grad_share", "pass", self._died(b), expected,
                           f"exactly-zero gradient entries: {a:.1%} at step {s0}, {b:.1%} at step {s1}")

    # ---- checkpointing --------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        keys = ("steps_seen", "loss_ema", "_ema_raw", "_ema_weight", "spikes", "zero_share_first", "zero_share_last",
                "zero_share_warned", "stuck_since", "stuck_last", "diverged", "error")
        state = {k: getattr(self, k) for k in keys}
        state["_norms"] = list(self._norms)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            if k == "_norms":
                self._norms = deque(v, maxlen=50)
            else:
                setattr(self, k, tuple(v) if k.startswith("zero_share_") and isinstance(v, list) else v)
