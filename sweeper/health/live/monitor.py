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

Beyond that (issue 29): every step's gradient norm is seen (the given grad_norm, else one fused norm per step,
read once per interval on a GPU), so a spike between two interval steps is caught; with `optimizer=` the lr is read
every step (a schedule that reaches zero long before `total_steps` is named) and every interval the optimizer's
tensors are compared with the model's (a replaced parameter is named); a stale .grad at the next backward (no
zero_grad) is caught through hooks armed on interval steps; the loss tensor's graph is watched for being kept
across steps and memory for growing; and the loss curve, the update/weight ratios and `observe_eval(step,
val_loss=..., val_acc=...)` give the run's curve checks and its one named diagnosis (report().diagnosis).

A closed training step (one call that does zero_grad, backward and step) attaches through hooks instead:
`LiveMonitor(model).attach(optimizer)` (monitor_hooks.py). The checks are built in monitor_checks.py.

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

from sweeper.health.common.batching import embedding_param_ids, grad_values
from sweeper.health.common.capacity import InputCapture
from sweeper.health.diagnosis import diagnose
from sweeper.health.live import monitor_checks
from sweeper.health.live.curves import Curve
from sweeper.health.live.monitor_hooks import HooksMixin
from sweeper.health.live.watch_memory import GraphWatch, MemoryWatch
from sweeper.health.live.watch_optimizer import AccumulationWatch, LrWatch, MembershipWatch
from sweeper.health.live.watch_reach import ReachWatch
from sweeper.health.live.watch_units import DeadUnitWatch
from sweeper.health.result import HealthReport
from sweeper.health.thresholds import DEFAULT_THRESHOLDS, Thresholds


def _layer(param_name: str) -> str:
    return param_name.rsplit(".", 1)[0] if "." in param_name else param_name


class LiveMonitor(HooksMixin):
    def __init__(self, model: nn.Module, *, interval: int = 50, num_classes: int | None = None,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS, per_layer: bool = True,
                 optimizer: torch.optim.Optimizer | None = None, total_steps: int | None = None):
        """optimizer: enables lr_schedule and optimizer_params. total_steps: the run's number of optimizer steps
        (a schedule reaching zero and memory growth are then judged against the steps left, while the run goes on)."""
        if not isinstance(interval, int) or interval < 1:
            raise ValueError(f"interval={interval!r}: expected an int >= 1 (steps between health measurements)")
        if total_steps is not None and (not isinstance(total_steps, int) or total_steps < 1):
            raise ValueError(f"total_steps={total_steps!r}: expected an int >= 1 (the run's optimizer steps) or None")
        self.model = model
        self.named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.total_steps = total_steps
        self.first_loss: float | None = None
        self.losses_seen = 0
        self._loss_sum, self._loss_count = 0.0, 0
        self.train_curve = Curve(thresholds.curve_points)
        self.val_loss, self.val_acc = Curve(thresholds.curve_points), Curve(thresholds.curve_points)
        self.ratios: dict[str, list[float]] = {}          # layer -> update/weight ratio per interval (thinned)
        self._queued: list[tuple[int, torch.Tensor]] = []  # per-step grad norms not yet read (GPU)
        self._news: list[str] = []                         # warnings found off interval steps, told on the next
        self.lr = LrWatch(optimizer, total_steps, thresholds)
        self.members = MembershipWatch(optimizer)
        self.accum = AccumulationWatch()
        self.reach = ReachWatch()
        self.graph = GraphWatch(thresholds)
        cuda = next((p.device for p in model.parameters() if p.device.type == "cuda"), None)
        self.memory = MemoryWatch(thresholds, total_steps, cuda)
        self.capture = InputCapture(model)
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
        self.units = DeadUnitWatch(thresholds.dead_window)
        self._lookup_ids = embedding_param_ids(model)
        self.stuck_since: int | None = None
        self.stuck_last: bool | None = None
        self._before: dict[str, torch.Tensor] | None = None
        self.error: str | None = None              # first measurement that failed on this model
        self._hooks: list[Any] = []
        self._hook_step = 0
        self._hook_loss: Any = None
        self._grad_flags: list[tuple[str, torch.Tensor]] = []
        self.pending: dict[str, Any] = {}

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
        interval = self.is_interval(step)
        self.lr.per_step(step)
        self._note(self.accum.check(step))
        if loss is not None:
            if interval and torch.is_tensor(loss):
                self.graph.plant(step, loss)
            loss_value = float(loss.detach() if torch.is_tensor(loss) else loss)
            if not math.isfinite(loss_value):
                self._diverge(step, f"loss is {loss_value}")
                return {"health/diverged": True}
            self._update_ema(loss_value)
            self._record_loss(loss_value)
        gn = None if grad_norm is None else float(grad_norm)   # one host read of a tensor norm, not two
        if gn is not None:
            if not math.isfinite(gn):
                self._diverge(step, f"gradient norm is {gn}{self._first_nonfinite_grad()}")
                return {"health/diverged": True}
            if not interval:
                self._note(self._spike(step, gn))
        elif not interval:
            self._queue_norm(step)
            if self.diverged:
                return {"health/diverged": True}
        if self.zero_share_first is None:   # baseline on the very first update, before any unit could die
            share = self._zero_share_now()
            if share is not None:
                self.zero_share_first = (step, share)
                self.units.observe(self.named, self._lookup_ids, first=True)
        if not interval:
            return self._told()
        self._flush_norms()
        if self.diverged:
            return {"health/diverged": True}
        self._refresh_params()
        out = self._measure_gradients(step, gn)
        if self._loss_count:
            self.train_curve.add(step, self._loss_sum / self._loss_count, self._loss_count)
            self._loss_sum, self._loss_count = 0.0, 0
        for found in (self.lr.warning(step), self.members.at_interval(step, self.model), self.graph.at_interval(step),
                      self.memory.sample(step)):
            self._note(found)
        self.accum.arm(step, self.named)
        told = self._told()
        if told:
            out["health/warning"] = "; ".join(w for w in (out.get("health/warning"), told["health/warning"]) if w)
        return out

    # ---- per-step evidence between interval steps ------------------------------------------------------------
    def _note(self, warning: str | None) -> None:
        if warning:
            self._news.append(warning)

    def _told(self) -> dict[str, Any]:
        news, self._news = self._news, []
        return {"health/warning": "; ".join(news)} if news else {}

    def _record_loss(self, value: float) -> None:
        if self.first_loss is None:
            self.first_loss = value
        self.losses_seen += 1
        self._loss_sum += value
        self._loss_count += 1

    def _queue_norm(self, step: int) -> None:
        """This step's global gradient norm: one fused norm; on a GPU kept as a tensor and read per interval."""
        grads = [grad_values(p.grad) for _, p in self.named if p.grad is not None]
        if not grads:
            return
        with torch.no_grad():
            norm = torch.stack([n.double() for n in torch._foreach_norm(grads)]).pow(2).sum().sqrt()
        self._queued.append((step, norm))
        if norm.device.type == "cpu":
            self._flush_norms()

    def _flush_norms(self) -> None:
        queued, self._queued = self._queued, []
        if not queued:
            return
        for (step, _), value in zip(queued, torch.stack([n for _, n in queued]).cpu().tolist()):
            if not math.isfinite(value):
                self._diverge(step, f"gradient norm is {value}{self._first_nonfinite_grad()}")
                return
            self._note(self._spike(step, value))

    def _refresh_params(self) -> None:
        """The model may have replaced a parameter: measure the ones it has now (optimizer_params names it)."""
        current = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        if [id(p) for _, p in current] != [id(p) for _, p in self.named]:
            self.named = current

    def observe_train_loss(self, step: int, value: float) -> None:
        """A logged train loss (run.log's train_loss), used only when the monitor is given no loss itself."""
        if self.losses_seen == 0 and value is not None and math.isfinite(float(value)):
            if self.first_loss is None:
                self.first_loss = float(value)
            self.train_curve.add(step, float(value))

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
        monitor_checks.record_ratios(self, ratios)
        finite = [r for r in ratios.values() if math.isfinite(r)]
        out: dict[str, Any] = {"health/update_ratio_max": max(finite) if finite else float("nan")}
        if self.per_layer:
            out["health/layer_update_ratio"] = ratios
        if len(finite) < len(ratios):
            self._diverge(step, "parameters became non-finite after optimizer.step()")
            out["health/diverged"] = True
        return out

    def observe_eval(self, step: int, val_loss: Any = None, val_acc: Any = None) -> None:
        """Validation metrics at `step` (the curve checks: val at chance, distribution shift, overfitting).
        A non-finite val loss marks the run diverged."""
        if val_loss is not None:
            value = float(val_loss.detach() if torch.is_tensor(val_loss) else val_loss)
            if not math.isfinite(value):
                self._diverge(step, f"validation loss is {value}")
                return
            self.val_loss.add(step, value)
        if val_acc is not None:
            acc = float(val_acc.detach() if torch.is_tensor(val_acc) else val_acc)
            if math.isfinite(acc):
                self.val_acc.add(step, acc)

    # ---- interval measurements ------------------------------------------------------------------------------
    def _measure_gradients(self, step: int, given_norm: float | None) -> dict[str, Any]:
        """given_norm: the caller's (pre-clipping) norm; spikes are judged on it when given, so the history
        holds one kind of figure even when the grads are clipped before this call."""
        grads = [(n, p.grad) for n, p in self.named if p.grad is not None]
        self.reach.observe(self.named)
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
        warnings = [w for w in (self._spike(step, global_norm if given_norm is None else given_norm),
                                self._zero_share(step, share), stuck) if w]
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
        first = self.zero_share_first is None
        if first:
            self.zero_share_first = (step, share)
        self.zero_share_last = (step, share)
        dead = self.units.observe(self.named, self._lookup_ids, first=first)
        if dead is not None and dead >= self.th.dead_share_warn and not self.zero_share_warned:
            self.zero_share_warned = True
            return (f"{self.units.worst}: {dead:.0%} of its units alive at the start got exactly zero gradient at "
                    f"{self.units.window} interval steps in a row by step {step} (exactly-zero gradient entries "
                    f"{self.zero_share_first[1]:.1%} -> {share:.1%}): units are dying (learning rate too high?)")
        return None

    def _died(self, share: float | None = None) -> float:
        """Of the units (weight-matrix rows) alive at the first check, the share now dead (watch_units.py)."""
        return self.units.dead_share

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
            return monitor_checks.stuck_line(self, step)
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
        """Every monitor check and the run's diagnosis (report.diagnosis) from what was seen so far."""
        self._flush_norms()
        checks = monitor_checks.all_checks(self)
        return HealthReport(checks, diagnosis=diagnose(checks))

    # ---- checkpointing --------------------------------------------------------------------------------------
    _STATE = ("steps_seen", "loss_ema", "_ema_raw", "_ema_weight", "spikes", "zero_share_first", "zero_share_last",
              "zero_share_warned", "stuck_since", "stuck_last", "diverged", "error", "first_loss", "losses_seen",
              "_loss_sum", "_loss_count", "ratios")
    _PARTS = ("train_curve", "val_loss", "val_acc", "lr", "members", "accum", "graph", "memory", "units", "reach")

    def state_dict(self) -> dict[str, Any]:
        self._flush_norms()
        state = {k: getattr(self, k) for k in self._STATE}
        state["_norms"] = list(self._norms)
        state.update({k: getattr(self, k).state_dict() for k in self._PARTS})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            if k == "_norms":
                self._norms = deque(v, maxlen=50)
            elif k == "accum":
                self.accum.load_state_dict(v, self.named)
            elif k in self._PARTS:
                getattr(self, k).load_state_dict(v)
            elif k in self._STATE:
                setattr(self, k, tuple(v) if k.startswith("zero_share_") and isinstance(v, list) else v)
