"""Parameters the loss never reaches, for the live monitor: the live half of gradient_flow.

    reach = ReachWatch()
    reach.observe(named_params)          # each interval step, after backward: who has no .grad at all
    reach.result()                       # a "gradient_flow" fail naming them, or None while every one is reached

A trainable parameter whose .grad is still None after backward got no gradient from this loss: it is unused, the
graph is cut before it (detach, no_grad, .data), or a custom torch.autograd.Function's backward returns None for
it. One such sample is no evidence (a conditional branch may skip a layer on one batch), so a parameter is named
only when it had no gradient at every interval sample (at least `min_samples`), while others had one. Only
None counts: a gradient of zeros was computed, and dead units are zero_grad_share's business. The check is
reported only when it finds something, so a run's preflight gradient_flow (same name) is never overruled by a
live pass.
"""
from __future__ import annotations

from typing import Any

import torch

from sweeper.health.result import CheckResult, name_list


class ReachWatch:
    def __init__(self, min_samples: int = 2):
        self.min_samples = min_samples
        self.samples = 0
        self.missing: dict[str, int] = {}        # parameter -> interval samples at which its .grad was None

    def observe(self, named: list[tuple[str, torch.nn.Parameter]]) -> None:
        none = [n for n, p in named if p.grad is None]
        if len(none) == len(named):              # no backward ran into .grad (hooks mode before the first step)
            return
        self.samples += 1
        for n in none:
            self.missing[n] = self.missing.get(n, 0) + 1

    def unreached(self) -> list[str]:
        return [n for n, k in self.missing.items() if k == self.samples] if self.samples >= self.min_samples else []

    def result(self, trainable: int) -> CheckResult | None:
        names = self.unreached()
        if not names:
            return None
        return CheckResult(
            "gradient_flow", "fail", len(names), "0 parameters the loss never reaches",
            f"{len(names)}/{trainable} trainable parameters got no gradient at any of the {self.samples} measured "
            f"steps ({name_list(names, 4)}): the loss never reaches them, so they never train - a custom "
            f"torch.autograd.Function whose backward returns None for them, a detach()/no_grad()/.data in the "
            f"forward pass, or a layer the forward never uses. Return their gradient from backward (or reconnect "
            f"them); if they are meant to stay fixed, freeze them with requires_grad_(False)",
            {"parameters": names, "samples": self.samples, "diagnosis": "dead_gradients"})

    def state_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "missing": dict(self.missing)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.samples, self.missing = state.get("samples", 0), dict(state.get("missing") or {})
