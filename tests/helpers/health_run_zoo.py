"""The run-level misses of issue 37 as broken/healthy twins for preflight (same shape as health_data_zoo's
cases): validation that is the training data under another name, class weights that favour the frequent classes,
a debug subset or limit left on, labels wrapped by a narrow integer dtype, and the false alarms a BatchNorm MLP
or a correctly weighted cross-entropy must not raise.

    from tests.helpers.health_run_zoo import CASES
    report = preflight(**CASES["debug_subset_left_on"].build(True, 0))   # bug=False: the healthy twin
    CASES["debug_subset_left_on"].prove(0)                              # the bug is real, measured independently

Sizes, class counts and batch sizes change with the seed.
"""
from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

from tests.helpers.health_data_models import MLP, adam, clusters, loader, sizes
from tests.helpers.health_data_zoo import Case, _seeded

FAST = ["overfit_batch", "param_movement", "update_ratio", "stale_grad"]     # the training checks: not the point


# 1. evaluate ignores its val_data and reads the training loader
def _evaluate_on(batches_of):
    def evaluate(model: nn.Module, val_data: Any) -> float:
        model.eval()
        total, n = 0.0, 0
        with torch.no_grad():
            for x, y in itertools.islice(batches_of(val_data), 4):
                total += F.cross_entropy(model(x), y, reduction="sum").item()
                n += len(y)
        model.train()
        return total / n
    return evaluate


def _eval_reads_train(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(1024, c, d, seed)
    xv, yv = clusters(256, c, d, seed + 100)
    train = loader(x, y, 32 * (1 + seed % 2), True, seed)
    val = loader(xv, yv, 64, False)
    evaluate = _evaluate_on((lambda _: iter(train)) if bug else (lambda v: iter(v)))
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=next(iter(train)), num_classes=c, loader=train,
                val_data=val, evaluate=evaluate, optimizer_factory=adam(), skip=FAST)


def _prove_eval_reads_train(seed: int) -> dict[str, float]:
    """A model wrapper counts the rows evaluate runs it on that are rows of the training tensor."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_eval_reads_train)(bug, seed)
        x_train = kw["loader"].dataset.tensors[0]
        seen = []

        class Spy(nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                seen.append(x)
                return self.inner(x)
        kw["evaluate"](Spy(kw["model"]), kw["val_data"])
        rows = torch.cat(seen)
        out[bug] = float((rows[:, None, :] == x_train[None]).all(-1).any(1).float().mean())
    assert out[True] == 1.0 and out[False] == 0.0, out
    return {"evaluated_rows_in_train_bug": out[True], "evaluated_rows_in_train_ok": out[False]}


# 2. a validation loader over the training dataset object (augmented: no two reads are byte-equal)
class Noisy(Dataset):
    """x + fresh noise on every read (augmentation), and the label."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i] + 0.05 * torch.randn(self.x.shape[1:]), self.y[i]


def _val_same_dataset(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(1024, c, d, seed)
    full = Noisy(x, y)
    order = torch.randperm(1024, generator=torch.Generator().manual_seed(seed))
    train_ds = Subset(full, order[:896].tolist())
    val_ds = Subset(full, (order[:128] if bug else order[896:]).tolist())   # bug: val indices from the train part
    g = torch.Generator().manual_seed(seed)
    train = DataLoader(train_ds, 64, shuffle=True, generator=g)
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=next(iter(train)), num_classes=c, loader=train,
                val_data=DataLoader(val_ds, 64), optimizer_factory=adam(), skip=FAST)


def _prove_val_same_dataset(seed: int) -> dict[str, float]:
    """Every validation index of the bug is a training index; none of the twin's. No byte-equal copies either
    way (the augmentation), so a digest of the examples cannot see it."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_val_same_dataset)(bug, seed)
        t, v = set(kw["loader"].dataset.indices), set(kw["val_data"].dataset.indices)
        out[bug] = len(t & v) / len(v)
        a, b = next(iter(kw["val_data"]))[0], next(iter(kw["val_data"]))[0]
        assert not torch.equal(a, b)                                  # two reads of one example differ
    assert out[True] == 1.0 and out[False] == 0.0, out
    return {"val_indices_in_train_bug": out[True], "val_indices_in_train_ok": out[False]}


# 3. class weights proportional to the frequencies (the inverse was meant)
def _imbalanced(seed: int, n: int = 2048) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    c, d = sizes(seed)
    x, y = clusters(n, c, d, seed)
    g = torch.Generator().manual_seed(seed + 3)
    y = torch.where(torch.rand(n, generator=g) < 0.7 + 0.1 * (seed % 3), torch.zeros_like(y), y)
    return x, y, c, d


def _class_weights(bug: bool, seed: int) -> dict[str, Any]:
    x, y, c, d = _imbalanced(seed)
    counts = torch.bincount(y, minlength=c).float()
    weight = counts / counts.sum() if bug else counts.sum() / (c * counts)       # bug: frequencies, not inverses
    data = loader(x, y, 64, True, seed)
    return dict(model=MLP(d, c), loss_fn=lambda z, t: F.cross_entropy(z, t, weight=weight), batch=next(iter(data)),
                num_classes=c, loader=data, optimizer_factory=adam(), skip=FAST)


def _prove_class_weights(seed: int) -> dict[str, float]:
    """Share of the loss the majority class carries at a uniform prediction, from cross_entropy's per-example
    losses times the weights: the bug raises it above the majority's label share, the twin lowers it to 1/C."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_class_weights)(bug, seed)
        y = kw["loader"].dataset.tensors[1]
        z = torch.zeros(len(y), kw["num_classes"])
        per = F.cross_entropy(z, y, reduction="none")
        w = torch.bincount(y, minlength=kw["num_classes"]).float()
        w = w / w.sum() if bug else w.sum() / (kw["num_classes"] * w)
        weighted = per * w[y]
        out[bug] = (float(weighted[y == 0].sum() / weighted.sum()), float((y == 0).float().mean()))
    assert out[True][0] > out[True][1] + 0.05 and out[False][0] < out[False][1] - 0.3, out
    return {"majority_loss_share_bug": out[True][0], "majority_loss_share_ok": out[False][0],
            "majority_label_share": out[True][1]}


# 4. a debug subset left on: Subset(train, range(k)) of a far larger training set
def _debug_subset(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(4096, c, d, seed)
    ds = TensorDataset(x, y)
    if bug:
        ds = Subset(ds, range(128 * (1 + seed % 2)))
    data = DataLoader(ds, 64, shuffle=True, generator=torch.Generator().manual_seed(seed))
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=next(iter(data)), num_classes=c, loader=data,
                optimizer_factory=adam(), skip=FAST)


def _prove_debug_subset(seed: int) -> dict[str, float]:
    """Distinct examples one full epoch of the loader yields, against the examples the data holds."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_debug_subset)(bug, seed)
        rows = torch.cat([xb for xb, _ in kw["loader"]])
        out[bug] = len(torch.unique(rows, dim=0)) / 4096
    assert out[True] < 0.1 and out[False] == 1.0, out
    return {"epoch_share_bug": out[True], "epoch_share_ok": out[False]}


# 5. a limit left on: the loop cycles through the first few batches
def _few_batches(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(2048, c, d, seed)
    full = loader(x, y, 32, True, seed)
    first = list(itertools.islice(iter(full), 3 + seed % 2))
    batches = list(itertools.islice(itertools.cycle(first), 40)) if bug else list(full)[:40]
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=batches[0], num_classes=c, loader=batches,
                optimizer_factory=adam(), skip=FAST)


def _prove_few_batches(seed: int) -> dict[str, float]:
    out = {}
    for bug in (True, False):
        batches = _seeded(_few_batches)(bug, seed)["loader"]
        out[bug] = len({xb.numpy().tobytes() for xb, _ in batches})
    assert out[True] <= 4 and out[False] == 40, out
    return {"distinct_batches_bug": out[True], "distinct_batches_ok": out[False]}


# 6. class ids stored as uint8 with more than 256 classes (cast back with .long() in the loss)
def _wrapped(bug: bool, seed: int) -> dict[str, Any]:
    c, d = 300 + 20 * (seed % 3), 16
    x, y = clusters(2048, c, d, seed)
    data = loader(x, y.to(torch.uint8) if bug else y, 64, True, seed)
    return dict(model=MLP(d, c), loss_fn=lambda z, t: F.cross_entropy(z, t.long()), batch=next(iter(data)),
                num_classes=c, loader=data, optimizer_factory=adam(),
                skip=FAST + ["feature_leak", "label_probe"])


def _prove_wrapped(seed: int) -> dict[str, float]:
    """Stored labels that differ from the true class ids, and classes merged (fewer distinct labels)."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_wrapped)(bug, seed)
        stored = kw["loader"].dataset.tensors[1].long()
        _, true = clusters(2048, kw["num_classes"], 16, seed)
        out[bug] = (float((stored != true).float().mean()), len(stored.unique()), len(true.unique()))
    assert out[True][0] > 0.05 and out[True][1] < out[True][2] and out[False][0] == 0.0, out
    return {"changed_bug": out[True][0], "distinct_labels_bug": out[True][1], "distinct_classes": out[True][2]}


# 7. a BatchNorm MLP on offset features: BatchNorm straight after the first Linear absorbs the offset (healthy);
# a ReLU between them (the bug) sees the raw offset
class BNMLP(nn.Module):
    def __init__(self, d: int, c: int, relu_first: bool):
        super().__init__()
        self.fc1, self.bn1, self.fc2, self.bn2 = nn.Linear(d, 64), nn.BatchNorm1d(64), nn.Linear(64, 64), \
            nn.BatchNorm1d(64)
        self.head = nn.Linear(64, c)
        self.relu_first = relu_first

    def forward(self, x):                                                   # (B, D) -> (B, C)
        h = self.bn1(F.relu(self.fc1(x))) if self.relu_first else F.relu(self.bn1(self.fc1(x)))
        return self.head(F.relu(self.bn2(self.fc2(h))))


def _bn_mlp(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(1024, c, d, seed)
    xv, yv = clusters(256, c, d, seed + 100)
    x, xv = 50 * x + 300, 50 * xv + 300                                     # raw units: offset 300, spread 50
    data = loader(x, y, 64, True, seed)

    def evaluate(model):
        model.eval()
        with torch.no_grad():
            loss = F.cross_entropy(model(xv), yv).item()
        model.train()
        return loss
    return dict(model=BNMLP(d, c, relu_first=bug), loss_fn=F.cross_entropy, batch=next(iter(data)), num_classes=c,
                loader=data, val_data=(xv, yv), evaluate=evaluate, optimizer_factory=adam(), skip=FAST)


def _prove_bn_mlp(seed: int) -> dict[str, float]:
    """Share of first-layer ReLU units whose input has one sign over the whole batch (always off or always on, a
    unit that cannot separate examples): most of them with the bug, few behind BatchNorm."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_bn_mlp)(bug, seed)
        m, (x, _) = kw["model"], kw["batch"]
        with torch.no_grad():
            pre = m.fc1(x) if bug else m.bn1(m.fc1(x))
        out[bug] = float(((pre > 0).all(0) | (pre <= 0).all(0)).float().mean())
    assert out[True] > 0.5 and out[False] < 0.1, out
    return {"one_sign_units_bug": out[True], "one_sign_units_ok": out[False]}


CASES = {c.name: c for c in [
    Case("evaluate_reads_the_training_loader", "val_overlap", ("fail",), "evaluate scores the model on training "
         "data", _seeded(_eval_reads_train), _prove_eval_reads_train),
    Case("val_loader_over_the_training_dataset", "val_overlap", ("fail",), "training data under another name",
         _seeded(_val_same_dataset), _prove_val_same_dataset),
    Case("class_weights_proportional_to_frequency", "class_weights", ("fail",), "favour the frequent classes",
         _seeded(_class_weights), _prove_class_weights),
    Case("debug_subset_left_on", "data_coverage", ("fail",), "debug subset", _seeded(_debug_subset),
         _prove_debug_subset),
    Case("limit_cycles_a_few_batches", "data_coverage", ("fail",), "the same few batches are cycled",
         _seeded(_few_batches), _prove_few_batches),
    Case("labels_wrapped_by_uint8", "labels", ("fail",), "wrapped by a narrow integer dtype", _seeded(_wrapped),
         _prove_wrapped),
    Case("batchnorm_mlp_relu_before_batchnorm", "inputs", ("warn",), "offset far from 0", _seeded(_bn_mlp),
         _prove_bn_mlp),
]}
