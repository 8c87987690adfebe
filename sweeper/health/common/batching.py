"""Batch plumbing shared by the checks: calling the model, slicing examples, and probe tensors.

A batch is `(inputs, targets)`. `inputs` is a tensor (`model(x)`), a tuple/list (`model(*x)`) or a dict
(`model(**x)`); every tensor in a batch has the example index on dim 0. The loss is `loss_fn(outputs, targets)`.

Probes: dependence checks (batch independence, causality) need d(something)/d(input). Float inputs are probed
directly; integer inputs (token ids) are probed at the output of every `nn.Embedding` whose output has the
batch on dim 0, through a forward hook that swaps in a fresh leaf tensor (so frozen embeddings work too).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any, Callable, Iterator

import torch
from torch import nn


def split_batch(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, dict) and {"inputs", "targets"} <= set(batch):
        return batch["inputs"], batch["targets"]
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    raise ValueError(f"batch: expected (inputs, targets) or {{'inputs': ..., 'targets': ...}}, "
                     f"got {type(batch).__name__}")


def call_model(model: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def primary_output(outputs: Any) -> torch.Tensor:
    """The tensor the dependence checks look at: the output itself, the first tensor of a tuple, or
    `logits` (else the first tensor) of a dict / ModelOutput."""
    if torch.is_tensor(outputs):
        return outputs
    if isinstance(outputs, dict):
        if torch.is_tensor(outputs.get("logits")):
            return outputs["logits"]
        outputs = list(outputs.values())
    for o in outputs:
        if torch.is_tensor(o):
            return o
    raise TypeError(f"model output {type(outputs).__name__} holds no tensor")


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if torch.is_tensor(obj):
        return fn(obj)
    if isinstance(obj, dict):
        return type(obj)((k, map_tensors(v, fn)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        return type(obj)(*(map_tensors(v, fn) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    return obj


def iter_tensors(obj: Any) -> Iterator[torch.Tensor]:
    if torch.is_tensor(obj):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from iter_tensors(v)
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from iter_tensors(v)


def batch_size(inputs: Any) -> int:
    for t in iter_tensors(inputs):
        if t.dim() > 0:
            return t.shape[0]
    raise ValueError("inputs hold no tensor with a batch dimension (dim 0)")


def take_examples(obj: Any, start: int, stop: int, n: int) -> Any:
    """Examples start..stop-1 of every tensor whose dim 0 is the batch size n (others pass through)."""
    return map_tensors(obj, lambda t: t[start:stop] if t.dim() > 0 and t.shape[0] == n else t)


@dataclass
class Probe:
    """Leaf tensors standing in for the model's inputs, filled during one forward pass."""

    names: list[str] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)


@contextmanager
def probed_forward(model: nn.Module, inputs: Any, n: int) -> Iterator[tuple[Probe, Any]]:
    """Run `model(inputs)` with probe leaves; yields (probe, outputs). Probes: float input tensors with the batch
    on dim 0, else the outputs of nn.Embedding modules with the batch on dim 0."""
    probe = Probe()

    def leafify(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point() and t.dim() > 0 and t.shape[0] == n:
            leaf = t.detach().clone().requires_grad_(True)
            probe.names.append(f"input[{len(probe.tensors)}]")
            probe.tensors.append(leaf)
            return leaf
        return t

    float_inputs = map_tensors(inputs, leafify)
    handles = []
    if not probe.tensors:  # integer inputs: probe embedding outputs instead
        index_shapes = {tuple(t.shape) for t in iter_tensors(inputs)
                        if not t.is_floating_point() and t.dim() > 0 and t.shape[0] == n}
        for name, module in model.named_modules():
            if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
                handles.append(module.register_forward_hook(_embedding_hook(name, probe, index_shapes)))
    try:
        outputs = call_model(model, float_inputs)
        yield probe, outputs
    finally:
        for h in handles:
            h.remove()


def _embedding_hook(name: str, probe: Probe, index_shapes: set[tuple[int, ...]]):
    """Probe only lookups indexed by a per-example input (shape (B, ...) of a model input), never e.g. a
    position table indexed by arange(T), whose rows are positions, not examples."""
    def hook(module, args, output):
        index = args[0] if args else None
        if (torch.is_tensor(index) and tuple(index.shape) in index_shapes and torch.is_tensor(output)
                and output.is_floating_point()):
            leaf = output.detach().clone().requires_grad_(True)
            probe.names.append(f"{name} (embedding output)")
            probe.tensors.append(leaf)
            return leaf
        return None
    return hook


def grad_values(g: torch.Tensor) -> torch.Tensor:
    """The stored entries of a gradient: a sparse gradient (nn.Embedding(sparse=True)) as its coalesced values
    (absent rows are legitimately zero), a dense one as is. torch.isfinite, == 0 and norms work on the result."""
    if g.layout != torch.strided:
        return g.coalesce().values() if g.is_sparse else g.values()
    return g


def trainable_named_parameters(model: nn.Module, ignore: tuple[str, ...] = ()) -> list[tuple[str, nn.Parameter]]:
    """Parameters with requires_grad, shared ones once, minus names matching any fnmatch pattern in `ignore`."""
    return [(name, p) for name, p in model.named_parameters()
            if p.requires_grad and not any(fnmatch(name, pat) for pat in ignore)]


def embedding_param_ids(model: nn.Module) -> set[int]:
    """Lookup tables (by id, so tied weights count whatever their name): rows of these legitimately get zero
    gradient, for the tokens absent from the batch."""
    return {id(p) for module in model.modules() if isinstance(module, (nn.Embedding, nn.EmbeddingBag))
            for p in module.parameters(recurse=False)}
