"""What the user's `evaluate` really feeds a model: the inputs of every outermost module call while it runs.

    with EvalInputs(max_examples=1024) as seen:
        call_evaluate(evaluate, model, val_data)
    seen.batches(like=x)  # [inputs of call 1, inputs of call 2, ...] (detached, on the CPU), up to max_examples,
                          # shaped like the training batch's inputs x (model(x, targets): the x only)
    seen.calls            # outermost forward calls seen (0: evaluate ran no module at all)

The val_data argument is only what evaluate was given; an evaluate that reads a global train_loader, or a
val_loader built on the training set, shows here. Global forward hooks (torch.nn.modules.module's) see any model
evaluate runs, a copy or an EMA model included; a depth counter keeps only the outermost call of each forward
(the model's, not its layers'). The hooks live only inside the `with`.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.nn.modules import module as _module

from sweeper.health.common.batching import map_tensors
from sweeper.health.common.data_sources import batch_len


class EvalInputs:
    def __init__(self, max_examples: int = 1024):
        self.max_examples = max_examples
        self.calls_args: list[tuple] = []        # the positional arguments of each outermost call
        self.examples = 0
        self.calls = 0
        self._depth = 0
        self._handles: list[Any] = []

    def _pre(self, module: torch.nn.Module, args: tuple) -> None:
        if self._depth == 0:
            self.calls += 1
            n = batch_len(tuple(args))
            if n and self.examples < self.max_examples:
                self.calls_args.append(map_tensors(tuple(args), lambda t: t.detach().cpu()))
                self.examples += n
        self._depth += 1

    def _post(self, module: torch.nn.Module, args: tuple, output: Any) -> None:
        self._depth = max(self._depth - 1, 0)

    def batches(self, like: Any = None) -> list[Any]:
        """The recorded inputs shaped like a training batch's `like` inputs: a tensor -> the first argument (a
        model(x, targets) call), a tuple of k -> the first k arguments; by default as call_model passes them."""
        if torch.is_tensor(like) or (like is None or isinstance(like, dict)):
            return [args[0] if len(args) == 1 or like is not None else tuple(args) for args in self.calls_args]
        k = len(like) if isinstance(like, (tuple, list)) else 1
        return [tuple(args[:k]) for args in self.calls_args]

    def __enter__(self) -> "EvalInputs":
        self._depth = 0
        self._handles = [_module.register_module_forward_pre_hook(self._pre),
                         _module.register_module_forward_hook(self._post)]
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
