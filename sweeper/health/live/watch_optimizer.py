"""Live watches on the optimizer side of a training loop (the LiveMonitor owns and calls them):

    lr = LrWatch(optimizer, total_steps, th);  lr.per_step(step);  lr.result(last_step)          # lr_schedule
    members = MembershipWatch(optimizer);  members.at_interval(step, model);  members.result()  # optimizer_params
    acc = AccumulationWatch();  acc.check(step);  acc.arm(named)  (both in after_backward)      # grad_accumulation

lr_schedule       every step reads each param group's lr (a float in a dict: no tensor, no sync). An lr that falls
                  to zero (<= lr_zero_fraction of its peak so far) with more than lr_zero_left_fraction of the run
                  left fails: the schedule's horizon is shorter than the run (T_max, total or decay steps given in
                  epochs instead of optimizer steps, a scheduler stepped per batch with a per-epoch horizon). With
                  total_steps the warning comes the moment it happens; without, at the end of the run.
optimizer_params  every interval compares the tensors in optimizer.param_groups with model.parameters(): a tensor the
                  optimizer holds but the model no longer has means the model replaced that parameter after the
                  optimizer was built (a layer re-created in forward or every step): the new one never trains (fail).
                  Trainable model parameters that no optimizer group holds are named too (warn: often a bug, at
                  times a deliberate freeze that should then set requires_grad=False).
grad_accumulation on every interval step, a pre-accumulation hook on each parameter (p.register_hook) looks at the
                  parameter's .grad when the NEXT backward first writes into it: a nonzero .grad left from the
                  previous step means optimizer.zero_grad() is missing (gradients add up across steps; with SGD +
                  momentum the loss still falls for a while). Exact, no false alarm on micro-batch accumulation
                  within a step (only the first write after the armed step counts); one host sync per interval.
"""
from __future__ import annotations

from typing import Any

import torch

from sweeper.health.common.batching import grad_values
from sweeper.health.result import CheckResult, name_list
from sweeper.health.thresholds import Thresholds


class LrWatch:
    def __init__(self, optimizer: torch.optim.Optimizer | None, total_steps: int | None, th: Thresholds):
        self.optimizer, self.total_steps, self.th = optimizer, total_steps, th
        self.peak: list[float] = []
        self.zero: dict[str, Any] | None = None     # {"step", "group", "lr", "peak"}: first step at ~0
        self.last_step: int | None = None
        self.warned = False

    def per_step(self, step: int) -> None:
        if self.optimizer is None:
            return
        groups = self.optimizer.param_groups
        if len(self.peak) != len(groups):
            self.peak = [0.0] * len(groups)
        self.last_step = step
        for i, g in enumerate(groups):
            lr = g.get("lr")
            if torch.is_tensor(lr):           # a tensor lr (capturable optimizers): read on interval steps only
                continue
            lr = float(lr)
            if lr > self.peak[i]:
                self.peak[i] = lr
            elif self.zero is None and self.peak[i] > 0 and lr <= self.th.lr_zero_fraction * self.peak[i]:
                self.zero = {"step": step, "group": i, "lr": lr, "peak": self.peak[i]}

    def warning(self, step: int) -> str | None:
        """The live warning, once, as soon as the lr is zero with too much of a known run left."""
        if self.zero is None or self.warned or not self.total_steps:
            return None
        if self._left(self.total_steps) > self.th.lr_zero_left_fraction:
            self.warned = True
            return self._message(self.total_steps)
        return None

    def _left(self, total: int) -> float:
        return (total - self.zero["step"]) / max(total, 1)

    def _message(self, total: int) -> str:
        z = self.zero
        left = total - z["step"]
        return (f"the learning rate of param group {z['group']} fell to {z['lr']:.3g} ({z['lr'] / z['peak']:.1e} of "
                f"its peak {z['peak']:.3g}) at step {z['step']} of {total}: the last {left} steps "
                f"({left / total:.0%} of the run) train with no learning rate. The schedule's horizon is shorter "
                f"than the run: T_max / total_steps / decay steps given in epochs instead of optimizer steps, or a "
                f"per-epoch scheduler stepped every batch. Fix: set the horizon to the total number of optimizer "
                f"steps")

    def result(self) -> CheckResult:
        name = "lr_schedule"
        expected = f"lr > {self.th.lr_zero_fraction:g} x peak until the last {self.th.lr_zero_left_fraction:.0%}"
        if self.optimizer is None:
            return CheckResult(name, "skip", None, expected, "not run: the monitor was given no optimizer",
                               {"enable": "optimizer=..."})
        if self.last_step is None:
            return CheckResult(name, "skip", None, expected, "no step observed")
        total = self.total_steps or self.last_step + 1
        details = {"peak": self.peak, "total_steps": total, "zero": self.zero}
        if self.zero is not None and self._left(total) > self.th.lr_zero_left_fraction:
            details["diagnosis"] = "lr_schedule_ends_early"
            return CheckResult(name, "fail", self.zero["step"], expected, self._message(total), details)
        if self.zero is not None:
            return CheckResult(name, "pass", self.zero["step"], expected,
                               f"lr reached ~0 at step {self.zero['step']} of {total}, in the run's last "
                               f"{self._left(total):.0%}", details)
        return CheckResult(name, "pass", None, expected,
                           f"the lr stayed above {self.th.lr_zero_fraction:g} of its peak through step "
                           f"{self.last_step}", details)

    def state_dict(self) -> dict[str, Any]:
        return {"peak": list(self.peak), "zero": self.zero, "last_step": self.last_step, "warned": self.warned}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.peak = list(state.get("peak") or [])
        self.zero, self.last_step, self.warned = state.get("zero"), state.get("last_step"), state.get("warned", False)


class MembershipWatch:
    def __init__(self, optimizer: torch.optim.Optimizer | None):
        self.optimizer = optimizer
        self.stale: dict[str, Any] | None = None      # first finding of tensors held only by the optimizer
        self.missing: dict[str, Any] | None = None    # first finding of trainable params held by no group
        self.checked = 0

    def at_interval(self, step: int, model: torch.nn.Module) -> str | None:
        """Compare once per interval; returns a warning line the first time something is wrong."""
        if self.optimizer is None:
            return None
        self.checked += 1
        named = list(model.named_parameters())
        in_model = {id(p) for _, p in named}
        held = [(gi, pi, p) for gi, g in enumerate(self.optimizer.param_groups) for pi, p in enumerate(g["params"])]
        in_opt = {id(p) for _, _, p in held}
        stale = [f"param_groups[{gi}]['params'][{pi}] {tuple(p.shape)}" for gi, pi, p in held if id(p) not in in_model]
        missing = [f"{n} {tuple(p.shape)}" for n, p in named if p.requires_grad and id(p) not in in_opt]
        news = None
        if stale and self.stale is None:
            self.stale = {"step": step, "tensors": stale, "untrained": missing}
            news = self._stale_message()
        if missing and not stale and self.missing is None:
            self.missing = {"step": step, "parameters": missing}
            news = self._missing_message()
        return news

    def _stale_message(self) -> str:
        s = self.stale
        untrained = (f"; the model's {name_list(s['untrained'], 3)} are in no param group and never train"
                     if s["untrained"] else "")
        return (f"at step {s['step']} the optimizer holds {len(s['tensors'])} tensors the model no longer has "
                f"({name_list(s['tensors'], 3)}){untrained}: the model replaced those parameters after the optimizer "
                f"was built (a layer or nn.Parameter re-created in forward or every step). Fix: create layers once "
                f"in __init__, or rebuild the optimizer after replacing a parameter")

    def _missing_message(self) -> str:
        m = self.missing
        return (f"at step {m['step']} {len(m['parameters'])} trainable parameters are in no optimizer param group "
                f"({name_list(m['parameters'], 3)}): they never change. Fix: build the optimizer from "
                f"model.parameters() after every layer exists, or set requires_grad=False if they are meant frozen")

    def result(self) -> CheckResult:
        name, expected = "optimizer_params", "optimizer holds exactly the model's trainable parameters"
        if self.optimizer is None:
            return CheckResult(name, "skip", None, expected, "not run: the monitor was given no optimizer",
                               {"enable": "optimizer=..."})
        if self.stale is not None:
            return CheckResult(name, "fail", len(self.stale["tensors"]), expected, self._stale_message(),
                               {**self.stale, "diagnosis": "params_not_trained"})
        if self.missing is not None:
            return CheckResult(name, "warn", len(self.missing["parameters"]), expected, self._missing_message(),
                               dict(self.missing))
        if not self.checked:
            return CheckResult(name, "skip", None, expected, "no interval step observed")
        return CheckResult(name, "pass", 0, expected,
                           f"the optimizer held the model's trainable parameters at all {self.checked} checks")

    def state_dict(self) -> dict[str, Any]:
        return {"stale": self.stale, "missing": self.missing, "checked": self.checked}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stale, self.missing, self.checked = state.get("stale"), state.get("missing"), state.get("checked", 0)


class AccumulationWatch:
    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.flags: dict[str, torch.Tensor] = {}
        self.armed_at: int | None = None
        self.found: dict[str, Any] | None = None     # {"step", "parameters"}
        self.checks = 0

    def arm(self, step: int, named: list[tuple[str, torch.nn.Parameter]]) -> None:
        """After backward of `step`: watch the next backward's first write into every parameter's .grad."""
        self.disarm()
        self.armed_at, self.flags = step, {}
        for name, p in named:
            self.handles.append(p.register_hook(self._hook(name, p)))

    def _hook(self, name: str, p: torch.nn.Parameter):
        def hook(grad):
            # grad is None when a custom autograd.Function's backward returns None for this parameter: nothing
            # is written into .grad, so nothing can be stale (watch_reach.py names a parameter never reached)
            if grad is not None and name not in self.flags:   # the first write only: micro-batches may add up
                g = p.grad
                self.flags[name] = torch.zeros((), dtype=torch.bool, device=grad.device) if g is None \
                    else grad_values(g).ne(0).any()
            return None
        return hook

    def disarm(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def check(self, step: int) -> str | None:
        """After backward of the step after the armed one: a warning line the first time .grad was stale."""
        if self.armed_at is None:
            return None
        flags, armed = self.flags, self.armed_at
        self.disarm()
        self.armed_at, self.flags = None, {}
        if not flags:
            return None
        self.checks += 1
        names = list(flags)
        stale = [n for n, f in zip(names, torch.stack([flags[n].cpu() for n in names]).tolist()) if f]
        if stale and self.found is None:
            self.found = {"step": step, "after_step": armed, "parameters": stale, "watched": len(names)}
            return self._message()
        return None

    def _message(self) -> str:
        f = self.found
        return (f"backward at step {f['step']} added into the gradient left from step {f['after_step']} in "
                f"{len(f['parameters'])}/{f['watched']} parameters ({name_list(f['parameters'], 3)}): "
                f"optimizer.zero_grad() is missing, so gradients add up across steps (with SGD + momentum the loss "
                f"still falls for a while, then the steps grow without bound). Fix: call optimizer.zero_grad() "
                f"every step")

    def result(self) -> CheckResult:
        name, expected = "grad_accumulation", "each step's backward starts from cleared gradients"
        if self.found is not None:
            return CheckResult(name, "fail", len(self.found["parameters"]), expected, self._message(),
                               {**self.found, "diagnosis": "zero_grad_missing"})
        if not self.checks:
            return CheckResult(name, "skip", None, expected, "no step after an interval step observed")
        return CheckResult(name, "pass", 0, expected,
                           f"gradients were cleared before backward at all {self.checks} checks")

    def state_dict(self) -> dict[str, Any]:
        """`armed_at`: a checkpoint written between an interval step and the next keeps that step's check due."""
        return {"found": self.found, "checks": self.checks, "armed_at": self.armed_at}

    def load_state_dict(self, state: dict[str, Any], named: list[tuple[str, torch.nn.Parameter]]) -> None:
        """Re-arms the hooks when the checkpoint fell between an interval step and its check, so a resumed run
        counts the same checks as one that never stopped."""
        self.found, self.checks = state.get("found"), state.get("checks", 0)
        self.disarm()
        self.armed_at, self.flags = None, {}
        if state.get("armed_at") is not None:
            self.arm(state["armed_at"], named)
