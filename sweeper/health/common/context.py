"""What every preflight check receives: the user's model, loss, batch and options, validated once; and the data
the data/evaluation checks read (the first loader batches, the validation batches, the evaluation function)."""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import torch
from torch import nn

from sweeper.health.common.batching import batch_size, call_model, trainable_named_parameters
from sweeper.health.common.data_sources import same_batch
from sweeper.health.thresholds import Thresholds

OptimizerFactory = Callable[[Any], torch.optim.Optimizer]
TrainStep = Callable[[nn.Module, Any, torch.optim.Optimizer], Any]    # train_step(model, batch, optimizer)


@dataclass
class PreflightContext:
    model: nn.Module
    loss_fn: Callable[[Any, Any], torch.Tensor]
    inputs: Any
    targets: Any
    optimizer_factory: OptimizerFactory
    num_classes: int | None
    sequence_dim: int | None
    train_step: TrainStep | None
    use_reference: Callable[[bool], Any] | None
    thresholds: Thresholds
    ignore: tuple[str, ...]
    seed: int
    loader_batches: list = field(default_factory=list)     # the first batches the training loader yields
    val_batches: list = field(default_factory=list)        # the first validation batches
    val_source: Any = None                                 # val_data as given (evaluate(model, val_data))
    evaluate: Callable | None = None                       # the user's evaluation function
    train_size: int | None = None                          # len(loader.dataset) when known
    loader_source: Any = None                              # the loader as given (class_mix samples its dataset)
    data_notes: dict = field(default_factory=dict)         # "loader"/"val_data": what could not be read
    eval_inputs: Any = None                                # what evaluate fed a model (common/eval_inputs.py)

    @cached_property
    def train_batches(self) -> list:
        """The preflight batch, then the loader's batches (the batch itself once, if it came from the loader)."""
        first = (self.inputs, self.targets)
        return [first] + [b for b in self.loader_batches if not same_batch(b, first)]

    @property
    def n(self) -> int:
        return batch_size(self.inputs)

    def params(self, model: nn.Module | None = None) -> list[tuple[str, nn.Parameter]]:
        return trainable_named_parameters(model if model is not None else self.model, self.ignore)

    def loss(self) -> torch.Tensor:
        return self.loss_of(call_model(self.model, self.inputs))

    def loss_of(self, outputs: Any, targets: Any = None) -> torch.Tensor:
        loss = self.loss_fn(outputs, self.targets if targets is None else targets)
        if not (torch.is_tensor(loss) and loss.numel() == 1):
            raise TypeError(f"loss_fn must return a scalar tensor, got {type(loss).__name__}"
                            f"{tuple(loss.shape) if torch.is_tensor(loss) else ''}")
        return loss.reshape(())


def default_optimizer_factory(params: Any) -> torch.optim.Optimizer:
    """Used when the caller gives none: Adam's per-element normalisation makes the step size independent of the
    gradient scale, so one learning rate suits most small models for the overfit test."""
    return torch.optim.Adam(params, lr=1e-3)


def normalize_train_step(fn: Callable) -> TrainStep:
    """fn in the common order train_step(model, batch, optimizer), or the older (model, optimizer, batch),
    recognised by its parameter names ("opt..." second) or annotations; returned in the common order."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return fn
    if len(params) < 3:
        return fn

    def is_optimizer(p) -> bool:
        ann = p.annotation
        return "opt" in p.name.lower() or (isinstance(ann, type) and issubclass(ann, torch.optim.Optimizer)) or \
            (isinstance(ann, str) and "Optimizer" in ann)
    if is_optimizer(params[1]) and not is_optimizer(params[2]):
        return lambda model, batch, optimizer: fn(model, optimizer, batch)
    return fn


def default_train_step(loss_fn: Callable[[Any, Any], torch.Tensor]) -> TrainStep:
    """A textbook step: clear gradients, forward, loss, backward, update."""
    def step(model: nn.Module, batch: Any, optimizer: torch.optim.Optimizer) -> torch.Tensor:
        inputs, targets = batch
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(call_model(model, inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step


def stepped_copy(ctx: "PreflightContext") -> nn.Module:
    """A private copy of ctx's model after one textbook optimizer step on ctx's batch (the RNG seeded with ctx.seed),
    left in the model's own train/eval mode. Raises what the step raises (an optimizer that refuses sparse
    gradients): the callers' second looks then keep the step-0 verdict."""
    model = copy.deepcopy(ctx.model)
    model.train()
    optimizer = ctx.optimizer_factory(model.parameters())
    torch.manual_seed(ctx.seed)
    default_train_step(ctx.loss_fn)(model, (ctx.inputs, ctx.targets), optimizer)
    model.train(ctx.model.training)
    return model
