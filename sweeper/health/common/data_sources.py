"""The examples the data and evaluation checks look at: the preflight batch, the first batches a training loader
yields, the validation batch(es); their input tensors by name, their targets read as labels, per-example keys.

    from sweeper.health.common.data_sources import read_batches, label_view, named_inputs
    batches, note = read_batches(loader, limit=8)      # the first 8 batches; a loader's generator is restored
    kind, y = label_view(targets, num_classes=10)      # "classes" (n,) int64 | "regression" | "sequence" | ...

Nothing here raises on odd data: a batch the checks cannot read is skipped with a reason (`note`), and every
check turns "nothing readable" into a "skip" line naming what it needs.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable

import torch

from sweeper.health.common.batching import iter_tensors


def is_batch(obj: Any) -> bool:
    """One (inputs, targets) batch, as opposed to an iterable of batches: a tuple/list of 2 whose first element
    is not itself a batch (a DataLoader yields [x, y] lists), or a dict with inputs/targets keys."""
    if isinstance(obj, dict):
        return {"inputs", "targets"} <= set(obj)
    if isinstance(obj, (tuple, list)) and len(obj) == 2:
        return not all(_looks_like_batch(part) for part in obj)
    return False


def _looks_like_batch(obj: Any) -> bool:
    return (isinstance(obj, dict) and {"inputs", "targets"} <= set(obj)) or \
        (isinstance(obj, (tuple, list)) and len(obj) == 2 and not torch.is_tensor(obj))


def split(batch: Any) -> tuple[Any, Any] | None:
    if isinstance(batch, dict) and {"inputs", "targets"} <= set(batch):
        return batch["inputs"], batch["targets"]
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    return None


def read_batches(source: Any, limit: int) -> tuple[list[tuple[Any, Any]], str]:
    """Up to `limit` (inputs, targets) batches from `source`: one batch, or an iterable of them (a DataLoader, a
    list, a generator). Returns (batches, note); the note says what was left out and why ("" when nothing).
    A DataLoader's own generator (and its sampler's) is put back, so reading it here does not move the run's
    data order; the global RNG is the caller's to fork."""
    if source is None:
        return [], ""
    if is_batch(source):
        pair = split(source)
        return ([pair], "") if pair is not None else ([], "not an (inputs, targets) batch")
    if not isinstance(source, Iterable) or isinstance(source, (str, bytes, torch.Tensor)):
        return [], f"expected a batch or an iterable of batches, got {type(source).__name__}"
    saved = _generator_states(source)
    batches: list[tuple[Any, Any]] = []
    note = ""
    try:
        for item in source:
            pair = split(item) if _looks_like_batch(item) or is_batch(item) else None
            if pair is None:
                note = f"item {len(batches)} is {type(item).__name__}, not an (inputs, targets) batch: stopped there"
                break
            batches.append(pair)
            if len(batches) >= limit:
                break
    except Exception as e:  # noqa: BLE001 - a loader that fails is reported by the checks, never raised
        note = f"reading it failed after {len(batches)} batches: {type(e).__name__}: {e}"
    finally:
        for gen, state in saved:
            gen.set_state(state)
    return batches, note


def _generator_states(loader: Any) -> list[tuple[torch.Generator, torch.Tensor]]:
    out = []
    for owner in (loader, getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None),
                  getattr(getattr(loader, "batch_sampler", None), "sampler", None)):
        gen = getattr(owner, "generator", None)
        if isinstance(gen, torch.Generator) and all(gen is not g for g, _ in out):
            out.append((gen, gen.get_state()))
    return out


def dataset_size(loader: Any) -> int | None:
    """len(loader.dataset) when the loader tells it (to scale a sample's overlap to the whole set)."""
    try:
        n = len(loader.dataset)
        return n if isinstance(n, int) and n > 0 else None
    except Exception:  # noqa: BLE001 - not a DataLoader
        return None


def dataset_targets(loader: Any, k: int, seed: int) -> Any:
    """The targets of up to k examples drawn at random from a map-style `loader.dataset` (stacked like a batch),
    or None: what the whole training set's labels look like, to compare the loader's first batches with."""
    ds = getattr(loader, "dataset", None)
    try:
        n = len(ds)
        if n <= 0 or isinstance(ds, torch.utils.data.IterableDataset):
            return None
        idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:k]
        if isinstance(ds, torch.utils.data.TensorDataset):
            return ds.tensors[-1][idx]
        ys = []
        for i in idx.tolist():
            pair = split(ds[i])
            if pair is None:
                return None
            ys.append(pair[1] if torch.is_tensor(pair[1]) else torch.tensor(pair[1]))
        return torch.stack(ys)
    except Exception:  # noqa: BLE001 - no map-style dataset behind this loader
        return None


def named_inputs(inputs: Any, prefix: str = "inputs") -> list[tuple[str, Any]]:
    """('inputs', x) for a tensor; ('inputs[0]', a), ('inputs[1]', b) for a tuple; ("inputs['ids']", t) for a
    dict. Non-tensor leaves are returned too (the checks skip them by name)."""
    if torch.is_tensor(inputs):
        return [(prefix, inputs)]
    if isinstance(inputs, dict):
        return [pair for k, v in inputs.items() for pair in named_inputs(v, f"{prefix}[{k!r}]")]
    if isinstance(inputs, (tuple, list)):
        return [pair for i, v in enumerate(inputs) for pair in named_inputs(v, f"{prefix}[{i}]")]
    return [(prefix, inputs)]


def batch_len(obj: Any) -> int | None:
    for t in iter_tensors(obj):
        if t.dim() > 0:
            return int(t.shape[0])
    return None


def example_tensors(inputs: Any, n: int) -> list[tuple[str, torch.Tensor]]:
    """The input tensors that hold one row per example (dim 0 == n), by name, on the CPU."""
    return [(name, t.detach().cpu()) for name, t in named_inputs(inputs)
            if torch.is_tensor(t) and t.dim() > 0 and t.shape[0] == n]


def example_keys(inputs: Any) -> list[bytes] | None:
    """One digest per example of every per-example input tensor (names, dtypes, shapes and bytes): exact
    duplicates share a key. None when the inputs hold no such tensor."""
    n = batch_len(inputs)
    tensors = example_tensors(inputs, n) if n else []
    if not tensors:
        return None
    blobs = [(name.encode(), str(t.dtype).encode(), t.contiguous().reshape(n, -1)) for name, t in tensors]
    keys = []
    for i in range(n):
        h = hashlib.blake2b(digest_size=16)
        for name, dtype, rows in blobs:
            h.update(name)
            h.update(dtype)
            h.update(rows[i].numpy().tobytes() if rows.dtype != torch.bfloat16 else rows[i].float().numpy().tobytes())
        keys.append(h.digest())
    return keys


def label_view(targets: Any, num_classes: int | None) -> tuple[str, torch.Tensor | None]:
    """How the targets read as labels:
    "classes"    (n,) int64 class indices: int (n,) or (n, 1); float (n,) holding whole numbers (0/1 for BCE,
                 or indices below num_classes); one-hot / probability rows (n, C) -> argmax.
    "regression" (n, k) float: any other float targets with one row per example.
    "sequence"   (n, ...) int64: a label per position (token prediction, tagging, segmentation); as is.
    "none"       no tensor targets (None, strings, ...), or nothing with an example dim.
    """
    if not torch.is_tensor(targets) or targets.dim() == 0:
        return "none", None
    t = targets.detach().cpu()
    if t.dtype == torch.bool:
        t = t.long()
    if not t.is_floating_point() and not t.is_complex():
        if t.dim() == 1 or (t.dim() == 2 and t.shape[1] == 1):
            return "classes", t.reshape(-1).long()
        return "sequence", t.long()
    if t.is_complex():
        return "none", None
    t = t.float()
    if t.dim() == 1 or (t.dim() == 2 and t.shape[1] == 1):
        flat = t.reshape(-1)
        if torch.isfinite(flat).all() and torch.equal(flat, flat.round()):
            lo, hi = float(flat.min()), float(flat.max())
            if (num_classes is not None and lo >= 0 and hi < num_classes) or (lo >= 0 and hi <= 1):
                return "classes", flat.long()
        return "regression", flat[:, None]
    if t.dim() == 2:
        if torch.isfinite(t).all() and bool((t >= 0).all()) and t.shape[1] >= 2 and \
                torch.allclose(t.sum(1), torch.ones(t.shape[0]), atol=1e-3) and \
                (num_classes is None or t.shape[1] == num_classes):
            return "classes", t.argmax(1)
        return "regression", t
    return "none", None


def pooled(batches: list[tuple[Any, Any]]) -> tuple[list[tuple[Any, Any]], str]:
    """The batches whose per-example input shapes and target shapes match the first one (so their examples can
    be stacked), and a note naming how many were left out."""
    if not batches:
        return [], ""

    def signature(b: tuple[Any, Any]) -> tuple:
        n = batch_len(b[0])
        ins = tuple((name, tuple(t.shape[1:]), t.dtype) for name, t in example_tensors(b[0], n or -1))
        tgt = b[1]
        return ins, (tuple(tgt.shape[1:]), tgt.dtype) if torch.is_tensor(tgt) else type(tgt).__name__

    first = signature(batches[0])
    kept = [b for b in batches if signature(b) == first]
    left = len(batches) - len(kept)
    return kept, (f"{left} batches with other shapes left out of the pooled examples" if left else "")


def concat_examples(batches: list[tuple[Any, Any]]) -> tuple[list[tuple[str, torch.Tensor]], Any]:
    """Input tensors (by name) and targets of several same-shaped batches stacked along the example dim."""
    parts = [example_tensors(b[0], batch_len(b[0]) or -1) for b in batches]
    names = [name for name, _ in parts[0]]
    inputs = [(name, torch.cat([p[i][1] for p in parts])) for i, name in enumerate(names)]
    targets = [b[1] for b in batches]
    if all(torch.is_tensor(t) for t in targets):
        return inputs, torch.cat([t.detach().cpu() for t in targets])
    return inputs, None


def same_batch(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """True when two batches hold the same tensors (the preflight batch taken from the loader it also passes)."""
    ta, tb = list(iter_tensors(a)), list(iter_tensors(b))
    if len(ta) != len(tb):
        return False
    return all(x is y or (x.shape == y.shape and x.dtype == y.dtype and x.device == y.device and torch.equal(x, y))
               for x, y in zip(ta, tb))
