"""The `data_coverage` check: does the training loader cover its dataset, or a debug subset / limit left on?

    result = data_coverage_check(ctx)        # ctx: a PreflightContext with loader= given

Evidence, from what the loader itself says and yields (nothing is guessed from the data's values):
- a Subset (nested Subsets too) that keeps a small share of the dataset it wraps: Subset(train, range(100));
- a sampler whose epoch draws a small share of the dataset: SubsetRandomSampler(idx[:100]),
  RandomSampler(ds, num_samples=100) (a DistributedSampler's share is multiplied back by its replicas);
- the loader ran out (one whole epoch read) after far fewer examples than len(loader.dataset);
- the first batches it yields repeat exactly: the same few batches cycled (itertools.cycle over a handful,
  [batch] * n, a list of the first k batches).
A share below `train_fraction_fail` (or a repeated batch) fails: the run trains on a fraction of its data, so
its numbers measure a debug run. An intended subset (a learning-curve study) is silenced with
+health.thresholds.train_fraction_fail=0.
"""
from __future__ import annotations

import hashlib
from typing import Any

import torch

from sweeper.health.common.data_sources import batch_len, example_keys
from sweeper.health.result import CheckResult


def _len(obj: Any) -> int | None:
    try:
        n = len(obj)
        return n if isinstance(n, int) and n >= 0 else None
    except Exception:  # noqa: BLE001 - no length (an IterableDataset, a generator)
        return None


def subset_chain(dataset: Any) -> tuple[Any, list[str]]:
    """The dataset under any nesting of torch Subsets, and the chain as 'Subset(100 of 60000)' steps."""
    steps = []
    while isinstance(dataset, torch.utils.data.Subset):
        inner = dataset.dataset
        steps.append(f"Subset({_len(dataset)} of {_len(inner)})")
        dataset = inner
    return dataset, steps


def _sampler_share(loader: Any, size: int) -> tuple[int, str] | None:
    """(examples one epoch of the loader's sampler draws, its description), for samplers that tell it."""
    sampler = getattr(loader, "sampler", None)
    if sampler is None or isinstance(sampler, torch.utils.data.SequentialSampler):
        return None
    n = _len(sampler)
    if n is None:
        return None
    replicas = int(getattr(sampler, "num_replicas", 1) or 1)      # DistributedSampler: one rank's share
    return n * replicas, f"{type(sampler).__name__} drawing {n}{f' x {replicas} ranks' if replicas > 1 else ''}"


def _batch_key(inputs: Any) -> bytes | None:
    keys = example_keys(inputs)
    if not keys:
        return None
    h = hashlib.blake2b(digest_size=16)
    for k in keys:
        h.update(k)
    return h.digest()


def data_coverage_check(ctx) -> CheckResult:
    th = ctx.thresholds
    name = "data_coverage"
    loader = ctx.loader_source
    expected = f"the loader covers >= {th.train_fraction_fail:g} of its dataset, no batch repeats"
    if loader is None:
        return CheckResult(name, "skip", None, "", "not run: pass loader=<your training DataLoader>")
    found: list[tuple[float, str]] = []                  # (share of the data trained on, evidence)
    details: dict[str, Any] = {}
    dataset = getattr(loader, "dataset", None)
    size = _len(dataset) if dataset is not None else None
    root, chain = subset_chain(dataset)
    root_size = _len(root)
    if chain and size is not None and root_size:
        details.update(subset=chain, root_size=root_size)
        found.append((size / root_size, f"its dataset is {' of '.join(chain)}: {size} of the {root_size} examples "
                                        f"of {type(root).__name__}"))
    if size:
        drawn = _sampler_share(loader, size)
        if drawn is not None:
            details.update(sampler_examples=drawn[0], dataset_size=size)
            found.append((drawn[0] / size, f"its sampler ({drawn[1]}) draws {drawn[0]} of the {size} examples "
                                           f"of its dataset per epoch"))
    limit = max(int(th.data_batches), 1)
    batches = ctx.loader_batches
    if size and batches and len(batches) < limit and not ctx.data_notes.get("loader"):
        seen = sum(batch_len(b[0]) or 0 for b in batches)       # the loader ran out: one whole epoch read
        details.update(epoch_examples=seen, dataset_size=size)
        found.append((seen / size, f"one pass over it yields {len(batches)} batches, {seen} examples, of the "
                                   f"{size} in its dataset (a limit on the batches or the data)"))
    keys = [_batch_key(b[0]) for b in batches]
    keys = [k for k in keys if k is not None]
    repeated = len(keys) >= 2 and len(set(keys)) < len(keys)
    if repeated:
        first = next(i for i, k in enumerate(keys) if keys.index(k) != i)
        details.update(batches_read=len(keys), distinct_batches=len(set(keys)))
        found.append((len(set(keys)) / len(keys), f"of the first {len(keys)} batches it yields only "
                                                  f"{len(set(keys))} differ (batch {first} repeats batch "
                                                  f"{keys.index(keys[first])} exactly): the same few batches are "
                                                  f"cycled"))
    if not found:
        what = f"{size} examples" if size else "its examples"
        return CheckResult(name, "pass", 1.0, expected, f"the loader draws on all {what} of its dataset and its "
                           f"first {len(batches)} batches differ", details)
    share, evidence = min(found, key=lambda f: f[0])
    details["share"] = share
    if th.train_fraction_fail > 0 and (share < th.train_fraction_fail or repeated):
        return CheckResult(name, "fail", share, expected,
                           f"training sees a fraction of its data: {evidence} ({share:.1%}): a debug subset or "
                           f"`limit` left on - remove it so the run trains on the whole training set; if the "
                           f"subset is intended, +health.thresholds.train_fraction_fail=0",
                           {**details, "diagnosis": "debug_subset"})
    return CheckResult(name, "pass", share, expected, f"{evidence} ({share:.0%}): above "
                       f"train_fraction_fail={th.train_fraction_fail:g}", details)
