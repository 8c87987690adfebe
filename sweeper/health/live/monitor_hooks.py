"""The LiveMonitor's hooks mode, for a closed training step (one call that does zero_grad, backward and step):

    monitor = LiveMonitor(model, interval=50).attach(optimizer)   # grad hooks + optimizer step hooks
    for step in ...:
        loss = train_step(model, batch, optimizer)                # yours, untouched
        monitor.observe_loss(loss)                                # optional: the loss checks
        metrics.update(monitor.take_metrics())
    monitor.detach()

Every parameter's post-accumulate-grad hook records whether its gradient is finite (no host sync); the optimizer's
step pre-hook runs after_backward and its post-hook after_step, counting steps itself.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from sweeper.health.common.batching import grad_values


class HooksMixin:
    def attach(self, optimizer: torch.optim.Optimizer | None = None) -> "HooksMixin":   # the LiveMonitor itself
        """Watch through hooks: every parameter's post-accumulate-grad hook records whether its gradient is
        finite (no host sync); with `optimizer`, its step pre-hook runs after_backward and its post-hook
        after_step, counting steps itself. Metrics collect in `take_metrics()`."""
        self.detach()
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad(name)) for name, p in self.named]
        if optimizer is not None and self.lr.optimizer is None:
            self.lr.optimizer = self.members.optimizer = optimizer
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
        step = max(self._hook_step - 1, 0)
        if torch.is_tensor(loss) and self.is_interval(step):
            self.graph.plant(step, loss)
        value = float(loss.detach() if torch.is_tensor(loss) else loss)
        if not math.isfinite(value):
            self._diverge(step, f"loss is {value}")
            self.pending["health/diverged"] = True
            return
        self._record_loss(value)

    def _pre_step(self) -> None:
        self._guarded(self._check_flags, self._hook_step)
        self.pending.update(self.after_backward(self._hook_step, None))

    def _post_step(self) -> None:
        self.pending.update(self.after_step(self._hook_step))
        self._hook_step += 1

