"""The `val_overlap` check: is what evaluation consumes disjoint from the training data?

    result = val_overlap_check(ctx)     # ctx: a PreflightContext; ctx.eval_inputs: what `evaluate` fed a model

The evidence is what evaluation really reads, not only the val_data it is handed:
- with `evaluate`, the inputs of every model call it makes (common/eval_inputs.py records them during the
  eval_determinism calls, or in one call of its own), so an evaluate that ignores its argument and reads the
  training loader, or a val loader built on the training set, is named;
- val_data's own examples (without evaluate, or beside it);
- the training loader and the validation loader drawing on the same dataset object (or a TensorDataset over the
  same tensors) at overlapping indices: the validation data is the training data under another name, even when
  random augmentation makes every example's bytes differ.
Examples match by a digest of every per-example input tensor; where the training loader's dataset is a
TensorDataset its whole input tensor is indexed (exact membership), else the first training batches are the
sample, judged against the sample's own duplicate rate and scaled to the training set's size. An evaluation that
scores training batches beside validation ones (a train metric) is fine: only the non-training batches are
judged as validation, and an evaluation that reads nothing but training examples fails.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from sweeper.health.checks.coverage import subset_chain
from sweeper.health.checks.eval import _Snapshot, call_evaluate
from sweeper.health.common.data_sources import batch_len, example_keys, example_tensors, split
from sweeper.health.common.eval_inputs import EvalInputs
from sweeper.health.result import CheckResult

_TRAIN_LIKE = 0.5           # a batch evaluate reads counts as training when at least half of it is training data
_INDEX_MAX_VALUES = 20_000_000   # a TensorDataset input tensor indexed whole up to this many values
_INDEX_MAX_ITEMS = 8192          # a map-style dataset indexed item by item up to this many items


def _abs_indices(dataset: Any) -> tuple[Any, set[int] | None]:
    """(root dataset, the root indices this (possibly nested) Subset exposes; None = all of them)."""
    idx = None
    while isinstance(dataset, torch.utils.data.Subset):
        sub = [int(i) for i in dataset.indices]
        idx = sub if idx is None else [sub[i] for i in idx]
        dataset = dataset.dataset
    return dataset, None if idx is None else set(idx)


def _same_storage(a: Any, b: Any) -> bool:
    if not (isinstance(a, torch.utils.data.TensorDataset) and isinstance(b, torch.utils.data.TensorDataset)):
        return False
    x, y = a.tensors[0], b.tensors[0]
    return x.shape == y.shape and x.dtype == y.dtype and (x.data_ptr() == y.data_ptr() or torch.equal(x, y))


def shared_dataset(train_loader: Any, val_source: Any) -> dict[str, Any] | None:
    """The validation loader reads the training loader's dataset (same object, or a TensorDataset over the same
    tensor) at indices the training loader also reads: {"share", "evidence"}; None when it does not."""
    tds, vds = getattr(train_loader, "dataset", None), getattr(val_source, "dataset", None)
    if tds is None or vds is None:
        return None
    (troot, tidx), (vroot, vidx) = _abs_indices(tds), _abs_indices(vds)
    if troot is not vroot and not _same_storage(troot, vroot):
        return None
    try:
        size = len(troot)
    except TypeError:
        return None
    t, v = tidx if tidx is not None else set(range(size)), vidx if vidx is not None else set(range(size))
    if not v or not t & v:
        return None
    share = len(t & v) / len(v)
    vchain, tchain = subset_chain(vds)[1], subset_chain(tds)[1]
    what = f"{type(troot).__name__} ({size} examples)"
    return {"share": share, "evidence": f"the validation loader's dataset is the training loader's {what}"
            + (f", validation {' of '.join(vchain)}" if vchain else "") + (f", training {' of '.join(tchain)}"
                                                                               if tchain else "")
            + f": {len(t & v)} of its {len(v)} validation indices are training indices"}


def _first_inputs(root: Any, idx: set[int] | None) -> torch.Tensor | None:
    """The training set's first input tensor, stacked: a TensorDataset's own tensor, or the items of a small
    map-style dataset (at most _INDEX_MAX_ITEMS __getitem__ calls)."""
    if isinstance(root, torch.utils.data.TensorDataset):
        return root.tensors[0] if root.tensors else None
    try:
        order = sorted(idx) if idx is not None else range(len(root))
        if len(order) > _INDEX_MAX_ITEMS or isinstance(root, torch.utils.data.IterableDataset):
            return None
        rows = []
        for i in order:
            pair = split(root[i])
            first = pair[0] if pair is not None else None
            while isinstance(first, (tuple, list)) and first:
                first = first[0]
            if not torch.is_tensor(first):
                return None
            rows.append(first)
        return torch.stack(rows) if rows else None
    except Exception:  # noqa: BLE001 - not a map-style dataset of (inputs, target) items
        return None


class TrainIndex:
    """Exact membership in the training set for inputs shaped like its TensorDataset's first tensor: one integer
    hash per row (wrapping int64 arithmetic on the row's bytes), so bitwise equal rows hash alike."""

    def __init__(self, loader: Any):
        self.hashes: torch.Tensor | None = None
        root, idx = _abs_indices(getattr(loader, "dataset", None))
        x = _first_inputs(root, idx)
        if x is None:
            return
        if x.dim() == 0 or x.numel() > _INDEX_MAX_VALUES:
            return
        rows = x if idx is None or not isinstance(root, torch.utils.data.TensorDataset) else \
            x[torch.tensor(sorted(idx), dtype=torch.long)]
        self.row_shape, self.dtype = tuple(x.shape[1:]), x.dtype
        self.coef: torch.Tensor | None = None
        self.hashes = self.hash(rows)
        self.size = int(rows.shape[0])

    def hash(self, rows: torch.Tensor) -> torch.Tensor:
        flat = rows.detach().cpu().contiguous().reshape(rows.shape[0], -1)
        data = flat.view(torch.uint8).reshape(rows.shape[0], -1) if flat.numel() else flat.to(torch.uint8)
        for wide in (torch.int64, torch.int32, torch.int16):     # the row's bytes as the widest words they fill
            if data.shape[1] % torch.empty(0, dtype=wide).element_size() == 0:
                data = data.view(wide)
                break
        if self.coef is None or self.coef.numel() != data.shape[1]:
            g = torch.Generator().manual_seed(12345)
            self.coef = torch.randint(1, 2**62, (data.shape[1],), generator=g, dtype=torch.long) | 1
        step = max(1, (4 << 20) // max(data.shape[1], 1))        # rows per chunk: <= 32 MiB of int64 at a time
        return torch.cat([(data[i:i + step].long() * self.coef).sum(1)                # (n,) wraps mod 2^64
                          for i in range(0, data.shape[0], step)]) if data.shape[0] else torch.zeros(0).long()

    def member(self, inputs: Any) -> torch.Tensor | None:
        """(n,) bool: which examples of `inputs` (its first per-example tensor) are training rows; None when the
        inputs are not shaped like the training tensor."""
        if self.hashes is None:
            return None
        n = batch_len(inputs)
        tensors = example_tensors(inputs, n) if n else []
        if not tensors:
            return None
        t = tensors[0][1]
        if tuple(t.shape[1:]) != self.row_shape or t.dtype != self.dtype:
            return None
        return torch.isin(self.hash(t), self.hashes)


def _keys(batches: list) -> list[tuple[bytes, int, int]]:
    out: list[tuple[bytes, int, int]] = []
    for bi, inputs in enumerate(batches):
        out += [(k, bi, i) for i, k in enumerate(example_keys(inputs) or [])]
    return out


def record_evaluate(ctx) -> EvalInputs | None:
    """What evaluate feeds a model: recorded by eval_determinism's first call, else by one call here (the model's
    state, mode and the RNG put back)."""
    if ctx.evaluate is None:
        return None
    if getattr(ctx, "eval_inputs", None) is not None:
        return ctx.eval_inputs
    snap = _Snapshot(ctx.model)
    seen = EvalInputs(ctx.thresholds.probe_max_examples)
    try:
        with torch.random.fork_rng(), seen:
            call_evaluate(ctx.evaluate, ctx.model, ctx.val_source)
    except Exception:  # noqa: BLE001 - eval_determinism reports an evaluate that fails
        return None
    finally:
        snap.restore()
    ctx.eval_inputs = seen
    return seen


def val_overlap_check(ctx) -> CheckResult:
    th = ctx.thresholds
    seen = record_evaluate(ctx)
    given = [inputs for inputs, _ in ctx.val_batches]
    evaluated = seen.batches(like=ctx.inputs) if seen is not None else []
    if not given and not evaluated:
        return CheckResult("val_overlap", "skip", None, "", "not run: pass val_data=<a validation batch or loader> "
                           "or evaluate=<your evaluation function>"
                           + (f" ({ctx.data_notes['val_data']})" if ctx.data_notes.get("val_data") else ""))
    expected = f"share <= {th.val_overlap_min_share:g}"
    shared = shared_dataset(ctx.loader_source, ctx.val_source)
    if shared is not None and shared["share"] > th.val_overlap_min_share:
        status = "fail" if shared["share"] >= th.val_overlap_fail else "warn"
        return CheckResult("val_overlap", status, shared["share"], expected,
                           f"validation data is the training data under another name: {shared['evidence']} "
                           f"({shared['share']:.0%}) - validate on a held-out split (indices disjoint from "
                           f"training)", {"shared_dataset": shared, "diagnosis": "val_is_train"})
    train = _keys([inputs for inputs, _ in ctx.train_batches])
    index = TrainIndex(ctx.loader_source) if ctx.loader_source is not None else None
    index = index if index is not None and index.hashes is not None else None
    if evaluated:
        judged = _judge_evaluated(ctx, seen, evaluated, train, index, given, expected)
        if judged is not None:
            return judged
    return _judge(ctx, given, train, index, expected, "validation", {})


def _in_train(batches: list, train: list, index: "TrainIndex | None") -> tuple[list[torch.Tensor], float]:
    """Per batch, (n,) bool: example found among training examples; and the share of the training set the
    lookup covers (1 with the full index)."""
    if index is not None:
        member = [index.member(b) for b in batches]
        if all(m is not None for m in member):
            return member, 1.0
    known = {k for k, _, _ in train}
    out = []
    for b in batches:
        keys = example_keys(b) or []
        out.append(torch.tensor([k in known for k in keys], dtype=torch.bool))
    return out, 0.0


def _judge_evaluated(ctx, seen: EvalInputs, evaluated: list, train: list, index, given: list, expected: str
                     ) -> CheckResult | None:
    th = ctx.thresholds
    member, exact = _in_train(evaluated, train, index)
    coverage = exact or (len(train) / ctx.train_size if ctx.train_size else 1.0)
    n_all = sum(len(m) for m in member)
    if not n_all:
        return None
    hits = sum(int(m.sum()) for m in member)
    est_all = min(1.0, hits / n_all / max(coverage, 1e-12))
    train_like = [i for i, m in enumerate(member) if len(m) and
                  (float(m.float().mean()) / max(coverage, 1e-12) >= _TRAIN_LIKE if exact else False)]
    only_train = (len(train_like) == len(member)) if exact else est_all >= 0.75
    note = ""
    if given:
        gkeys = {k for k, _, _ in _keys(given)}
        ekeys = {k for k, _, _ in _keys(evaluated)}
        if gkeys and ekeys and not gkeys & ekeys:
            note = "; none of them is an example of the val_data passed: evaluate ignores its val_data argument"
    details = {"evaluated_examples": n_all, "evaluated_calls": seen.calls, "in_training": hits,
               "estimated_share": est_all, "exact_lookup": bool(exact), "train_like_batches": len(train_like)}
    if only_train and est_all > th.val_overlap_min_share:
        status = "fail" if est_all >= th.val_overlap_fail else "warn"
        how = ("all of them are rows of the training set" if exact and hits == n_all else
               f"{hits} are rows of the training set" if exact else
               f"{hits} match the {len(train)} training examples sampled, so about {est_all:.0%} are training "
               f"examples")
        return CheckResult("val_overlap", status, est_all, expected,
                           f"evaluate scores the model on training data: of the {n_all} examples it fed the model, "
                           f"{how}{note} - it reads the training set (a train loader used for validation, a "
                           f"val loader built on the training data); evaluate on the held-out validation split",
                           {**details, "diagnosis": "val_is_train"})
    rest = [b for i, b in enumerate(evaluated) if i not in train_like]
    extra = {**details, "note": note.lstrip("; ")} if note else details
    if train_like:
        extra["note"] = (extra.get("note", "") + f" evaluate also scores {len(train_like)} training batches "
                         f"(a training metric); the other {len(rest)} are judged").strip()
    return _judge(ctx, rest, train, index, expected, "evaluated", extra)


def _judge(ctx, batches: list, train: list, index, expected: str, what: str, extra: dict) -> CheckResult:
    """The statistical overlap test of `batches` (validation inputs) against the training examples."""
    th = ctx.thresholds
    val = _keys(batches)
    if not val:
        return CheckResult("val_overlap", "skip", None, "", "not run: no per-example input tensors to compare")
    member, exact = _in_train(batches, train, index)
    flat = torch.cat(member) if member else torch.zeros(0, dtype=torch.bool)
    n_val, m = len(val), int(flat.sum())
    share = m / n_val
    if exact:
        p, dup_share, estimate = (0.0 if m else 1.0), 0.0, share
    else:
        counts = Counter(k for k, _, _ in train)
        dup_share = sum(1 for k, _, _ in train if counts[k] > 1) / max(len(train), 1)
        lam = n_val * dup_share
        from scipy import special  # deferred: scipy, only when this runs
        p = 0.0 if lam == 0 else float(special.pdtrc(m - 1, lam)) if m else 1.0
        coverage = len(train) / ctx.train_size if ctx.train_size else None
        estimate = min(1.0, share / coverage) if coverage else share
    details = {**extra, "val_examples": n_val, "train_examples": index.size if exact else len(train), "matches": m,
               "share": share, "estimated_share": estimate, "train_duplicate_share": dup_share, "p": p,
               "evidence": what}
    tail = f"; {extra['note']}" if extra.get("note") else ""
    if m == 0 or p >= 1e-3 or estimate <= th.val_overlap_min_share:
        extra_msg = (f"; {m} matches, as many as the training sample's own repeats ({dup_share:.1%}) explain"
                     if m else "")
        seen = f"the {index.size} training examples (all indexed)" if exact else \
            f"the {len(train)} training examples seen"
        return CheckResult("val_overlap", "pass", share, expected,
                           (f"no {what} example of {n_val} repeats one of {seen}" if not m else
                            f"{m} of {n_val} {what} examples repeat training examples") + extra_msg + tail, details)
    where = {k: (bi, i) for k, bi, i in reversed(train)}
    hit = next(((vb, vi, where[k]) for k, vb, vi in val if k in where), None)
    if hit is None:
        vb, vi = next((bi, int(m.nonzero()[0])) for bi, m in enumerate(member) if m.any())
        example = f" (e.g. {what} batch {vb} example {vi} is a training row)"
    else:
        (vb, vi, (tb, ti)) = hit
        example = f" (e.g. {what} batch {vb} example {vi} = training batch {tb} example {ti})"
        details["example"] = {"val_batch": vb, "val_index": vi, "train_batch": tb, "train_index": ti}
    coverage = None if exact else (len(train) / ctx.train_size if ctx.train_size else None)
    scaled = (f"; {len(train)} of {ctx.train_size} training examples were compared, so about {estimate:.0%} of the "
              f"validation set is likely in the training set" if coverage and coverage < 1 else "")
    status = "fail" if estimate >= th.val_overlap_fail else "warn"
    return CheckResult("val_overlap", status, share, expected,
                       f"{m} of {n_val} {what} examples ({share:.1%}) are exact copies of training examples"
                       f"{example}{scaled}: the validation set overlaps the training set (validating on training "
                       f"data, or a split that reuses examples), so its metrics overstate generalisation - split by "
                       f"unique example (deduplicate before splitting){tail}", {**details, "diagnosis": "val_is_train"})
