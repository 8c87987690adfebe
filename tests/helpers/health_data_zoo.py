"""The data and evaluation bug zoo: broken/healthy pairs for the checklist's other half (inputs not standardized,
labels shuffled apart from their inputs, a label leaked into the features, class-sorted loaders, validation
overlapping training, dropout or BatchNorm left in train mode for evaluation, padding counted in the loss...).

    from tests.helpers.health_data_zoo import CASES
    case = CASES["shuffled_labels"]
    report = preflight(**case.build(bug=True, seed=0))    # bug=False: the healthy twin, same model and sizes
    case.prove(seed=0)                                     # measures that the bug is real (AssertionError if not)

Stand-ins: Gaussian clusters for MNIST features, 8x8 prototype images with pixel noise for MNIST images (a tiny
CNN with BatchNorm), arithmetic token sequences of varying length with padding for a tiny causal LM. Sizes and
class counts change with the seed, so no check is tuned to one example.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from tests.helpers.health_data_models import (
    CNN,
    MLP,
    PAD,
    VOCAB,
    TinyLM,
    accuracy,
    adam,
    clusters,
    images,
    lm_loss,
    loader,
    make_evaluate,
    sizes,
    standardize,
    token_batch,
    train,
)


# ---- cases -------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    caught_by: str
    status: tuple[str, ...]             # the statuses that count as flagged for this bug
    says: str                           # a phrase of the right cause in the check's message
    build: Callable[[bool, int], dict[str, Any]]
    prove: Callable[[int], dict[str, float]]
    slow_proof: bool = False            # the proof trains a model


def _seeded(fn):
    def build(bug: bool, seed: int = 0) -> dict[str, Any]:
        torch.manual_seed(seed)
        return fn(bug, seed)
    return build


# 1. raw 0-255 pixels into an MLP
def _raw_pixels(bug: bool, seed: int) -> dict[str, Any]:
    c, _ = sizes(seed)
    x, y = images(256, c, seed)
    x = (x * 255).round() if bug else standardize(x)
    return dict(model=MLP(64, c), loss_fn=F.cross_entropy, batch=(x[:64], y[:64]), num_classes=c,
                loader=loader(x, y, 64, True, seed), optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.05))


def _prove_raw_pixels(seed: int) -> dict[str, float]:
    """The untrained model's loss on raw pixels is many nats above ln C; on standardized ones it is about ln C."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_raw_pixels)(bug, seed)
        torch.manual_seed(seed)
        model = MLP(64, kw["num_classes"])
        with torch.no_grad():
            out[bug] = float(F.cross_entropy(model(kw["batch"][0]), kw["batch"][1])) - math.log(kw["num_classes"])
    assert out[True] > 3 and abs(out[False]) < 1, out
    return {"excess_raw": out[True], "excess_standardized": out[False]}


# 2. one tabular feature left in raw units (an income in dollars among standardized features)
def _unscaled_feature(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(512, c, d, seed)
    if bug:
        x = x.clone()
        x[:, 3] = 4e4 + 1.5e4 * x[:, 3]
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=(x[:64], y[:64]), num_classes=c,
                loader=loader(x, y, 64, True, seed), optimizer_factory=adam())


def _prove_unscaled_feature(seed: int) -> dict[str, float]:
    """The raw column carries almost all of the first layer's pre-activation variance."""
    shares = {}
    for bug in (True, False):
        kw = _seeded(_unscaled_feature)(bug, seed)
        torch.manual_seed(seed)
        fc1 = MLP(kw["batch"][0].shape[1], kw["num_classes"]).fc1
        x = kw["batch"][0]
        with torch.no_grad():
            full = (x @ fc1.weight.T).var(0).sum()
            col = (x[:, 3:4] @ fc1.weight[:, 3:4].T).var(0).sum()
        shares[bug] = float(col / full)
    assert shares[True] > 0.99 and shares[False] < 0.5, shares
    return {"column_share_bug": shares[True], "column_share_ok": shares[False]}


# 3. inputs and labels shuffled separately
def _shuffled(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(1024, c, d, seed)
    if bug:
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed + 5))]
    xv, yv = clusters(256, c, d, seed + 100)
    data = loader(x, y, 64, True, seed)
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=next(iter(data)), num_classes=c, loader=data,
                optimizer_factory=adam(), val_data=(xv, yv))


def _prove_shuffled(seed: int) -> dict[str, float]:
    """Trained on the shuffled pairs, the train loss still falls (memorising) but validation accuracy sits at
    chance; the healthy twin generalises."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_shuffled)(bug, seed)
        torch.manual_seed(seed)
        model = MLP(kw["batch"][0].shape[1], kw["num_classes"])
        losses = train(model, kw["loader"], 400)
        out[bug] = (losses[0], sum(losses[-20:]) / 20, accuracy(model, *kw["val_data"]))
    c = kw["num_classes"]
    assert out[True][1] < out[True][0] and out[True][2] < 1 / c + 0.12, out
    assert out[False][2] > 0.8, out
    return {"val_acc_bug": out[True][2], "val_acc_ok": out[False][2], "chance": 1 / c}


# 4. the label left among the features
def _leak(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(512, c, d, seed)
    if bug:
        x = x.clone()
        x[:, d // 2] = y.float()
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=(x[:64], y[:64]), num_classes=c,
                loader=loader(x, y, 64, True, seed), optimizer_factory=adam())


def _prove_leak(seed: int) -> dict[str, float]:
    """Rounding that one column reproduces every label; the same rule on the healthy data is near chance."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_leak)(bug, seed)
        x, y = kw["loader"].dataset.tensors
        j = x.shape[1] // 2
        out[bug] = float((x[:, j].round().long() == y).float().mean())
    assert out[True] == 1.0 and out[False] < 0.5, out
    return {"rule_acc_bug": out[True], "rule_acc_ok": out[False]}


# 5. a loader over class-sorted data, unshuffled
def _sorted(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(1024, c, d, seed)
    if bug:
        order = y.argsort(stable=True)
        x, y = x[order], y[order]
    data = loader(x, y, 32, shuffle=not bug, seed=seed)
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=next(iter(data)), num_classes=c, loader=data,
                optimizer_factory=adam())


def _prove_sorted(seed: int) -> dict[str, float]:
    """One epoch over class-sorted batches ends predicting the last classes: validation accuracy far below the
    shuffled twin's."""
    out = {}
    c, d = sizes(seed)
    xv, yv = clusters(512, c, d, seed + 100)
    for bug in (True, False):
        kw = _seeded(_sorted)(bug, seed)
        torch.manual_seed(seed)
        model = MLP(d, c)
        train(model, kw["loader"], len(kw["loader"]), lr=1e-2)
        out[bug] = accuracy(model, xv, yv)
    assert out[True] < 0.6 and out[False] > out[True] + 0.3, out
    return {"val_acc_sorted": out[True], "val_acc_shuffled": out[False]}


# 6. validation examples taken from the training set
def _overlap(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(2048, c, d, seed)
    xv, yv = (x[:256], y[:256]) if bug else clusters(256, c, d, seed + 100)
    data = loader(x, y, 64, True, seed)
    return dict(model=MLP(d, c), loss_fn=F.cross_entropy, batch=next(iter(data)), num_classes=c, loader=data,
                optimizer_factory=adam(), val_data=loader(xv, yv, 64, False))


def _prove_overlap(seed: int) -> dict[str, float]:
    """Row-by-row comparison: every validation example of the bug is a training row; none of the twin's."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_overlap)(bug, seed)
        x = kw["loader"].dataset.tensors[0]
        xv = kw["val_data"].dataset.tensors[0]
        out[bug] = float((xv[:, None, :] == x[None, :, :]).all(-1).any(1).float().mean())
    assert out[True] == 1.0 and out[False] == 0.0, out
    return {"val_in_train_bug": out[True], "val_in_train_ok": out[False]}


# 7. evaluation without model.eval(): dropout stays on
def _dropout_eval(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(256, c, d, seed)
    xv, yv = clusters(256, c, d, seed + 100)
    return dict(model=MLP(d, c, dropout=0.3), loss_fn=F.cross_entropy, batch=(x[:64], y[:64]), num_classes=c,
                optimizer_factory=adam(), val_data=(xv, yv), evaluate=make_evaluate(xv, yv, use_eval=not bug))


def _prove_eval_twice(build) -> Callable[[int], dict[str, float]]:
    """The user's evaluate called twice on the same weights: different numbers with the bug, equal without."""
    def prove(seed: int) -> dict[str, float]:
        out = {}
        for bug in (True, False):
            kw = build(bug, seed)
            state = {k: v.clone() for k, v in kw["model"].state_dict().items()}
            a = kw["evaluate"](kw["model"])
            kw["model"].load_state_dict(state)
            b = kw["evaluate"](kw["model"])
            out[bug] = abs(a - b) / abs(a)
        assert out[True] > 1e-4 and out[False] == 0.0, out
        return {"rel_diff_bug": out[True], "rel_diff_ok": out[False]}
    return prove


# 8. evaluation without model.eval(): BatchNorm normalizes with the validation batch and overwrites its stats
def _bn_eval(bug: bool, seed: int) -> dict[str, Any]:
    c, _ = sizes(seed)
    x, y = images(256, c, seed)
    xv, yv = images(256, c, seed + 100)
    x, xv = standardize(x), standardize(xv, x)
    return dict(model=CNN(c), loss_fn=F.cross_entropy, batch=(x[:64], y[:64]), num_classes=c,
                optimizer_factory=adam(1e-2), val_data=(xv, yv), evaluate=make_evaluate(xv[:64], yv[:64], not bug),
                loader=loader(x, y, 64, True, seed))


def _prove_bn_eval(seed: int) -> dict[str, float]:
    """The bug's evaluate rewrites the BatchNorm running statistics with validation data; the twin's does not."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_bn_eval)(bug, seed)
        before = kw["model"].bn1.running_mean.clone()
        kw["evaluate"](kw["model"])
        out[bug] = float((kw["model"].bn1.running_mean - before).abs().max())
    assert out[True] > 1e-3 and out[False] == 0.0, out
    return {"running_mean_moved_bug": out[True], "running_mean_moved_ok": out[False]}


# 9. F.dropout(h, p) in forward: on even in eval mode
def _functional_dropout(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(256, c, d, seed)
    xv, yv = clusters(128, c, d, seed + 100)
    return dict(model=MLP(d, c, functional="always" if bug else "mode"), loss_fn=F.cross_entropy,
                batch=(x[:64], y[:64]), num_classes=c, optimizer_factory=adam(), val_data=(xv, yv),
                evaluate=make_evaluate(xv, yv, True))


def _prove_functional_dropout(seed: int) -> dict[str, float]:
    """model.eval(): two forwards of the same batch differ with the bug, agree without."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_functional_dropout)(bug, seed)
        m = kw["model"].eval()
        with torch.no_grad():
            out[bug] = float((m(kw["val_data"][0]) - m(kw["val_data"][0])).abs().max())
    assert out[True] > 1e-3 and out[False] == 0.0, out
    return {"eval_diff_bug": out[True], "eval_diff_ok": out[False]}


# 10. the validation pipeline forgets the normalization
def _val_unnormalized(bug: bool, seed: int) -> dict[str, Any]:
    c, _ = sizes(seed)
    x, y = images(512, c, seed)
    xv, yv = images(256, c, seed + 100)
    xs = standardize(x)
    xv = (xv * 255).round() if bug else standardize(xv, x)
    return dict(model=CNN(c), loss_fn=F.cross_entropy, batch=(xs[:64], y[:64]), num_classes=c,
                optimizer_factory=adam(1e-2), loader=loader(xs, y, 64, True, seed), val_data=(xv, yv))


def _prove_val_unnormalized(seed: int) -> dict[str, float]:
    """A CNN trained on the standardized training data scores far worse on the unnormalized validation set."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_val_unnormalized)(bug, seed)
        torch.manual_seed(seed)
        model = CNN(kw["num_classes"])
        train(model, kw["loader"], 150, lr=1e-2)
        out[bug] = accuracy(model, *kw["val_data"])
    assert out[False] > 0.8 and out[True] < out[False] - 0.3, out
    return {"val_acc_bug": out[True], "val_acc_ok": out[False]}


# 11. BatchNorm whose running statistics never move (momentum 0)
def _bn_frozen(bug: bool, seed: int) -> dict[str, Any]:
    c, _ = sizes(seed)
    x, y = images(256, c, seed)
    x = 3 * x                           # [0, 3] pixels: the initial running statistics (0, 1) do not fit them
    return dict(model=CNN(c, momentum=0.0 if bug else 0.1), loss_fn=F.cross_entropy, batch=(x[:64], y[:64]),
                num_classes=c, optimizer_factory=adam(1e-2), loader=loader(x, y, 64, True, seed))


def _prove_bn_frozen(seed: int) -> dict[str, float]:
    """After 50 train-mode forwards the momentum-0 running mean is still 0, and eval-mode logits differ from
    train-mode ones; the twin's eval mode reproduces train mode."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_bn_frozen)(bug, seed)
        m, (x, _) = kw["model"], kw["batch"]
        m.train()
        with torch.no_grad():
            for _ in range(50):
                train_out = m(x)
            m.eval()
            eval_out = m(x)
        out[bug] = float((eval_out - train_out).norm() / train_out.norm())
    assert out[True] > 0.4 and out[False] < 0.2, out
    return {"eval_vs_train_bug": out[True], "eval_vs_train_ok": out[False]}


# 12. a language model's loss counts the padding
def _padding_counted(bug: bool, seed: int) -> dict[str, Any]:
    x, y = token_batch(32 + 8 * (seed % 3), seed, ignore=None if bug else -100)
    return dict(model=TinyLM(), loss_fn=lm_loss, batch=(x, y), num_classes=VOCAB, sequence_dim=1,
                optimizer_factory=adam(1e-2))


def _prove_padding_counted(seed: int) -> dict[str, float]:
    """A large share of the positions the loss averages over are padding (targets == PAD)."""
    out = {}
    for bug in (True, False):
        _, y = _seeded(_padding_counted)(bug, seed)["batch"]
        counted = y != -100
        out[bug] = float((y[counted] == PAD).float().mean())
    assert out[True] > 0.2 and out[False] == 0.0, out
    return {"pad_share_of_loss_bug": out[True], "pad_share_of_loss_ok": out[False]}


# 13. an inverted padding mask: the loss counts only the padding
def _masked_loss(invert: bool):
    def loss(logits, targets):
        mask = (targets == PAD) if invert else (targets != PAD)
        per = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
        return (per * mask.flatten()).sum() / mask.sum().clamp(min=1)
    return loss


def _mask_inverted(bug: bool, seed: int) -> dict[str, Any]:
    x, y = token_batch(32 + 8 * (seed % 3), seed, ignore=None)
    return dict(model=TinyLM(), loss_fn=_masked_loss(invert=bug), batch=(x, y), num_classes=VOCAB, sequence_dim=1,
                optimizer_factory=adam(1e-2))


def _prove_mask_inverted(seed: int) -> dict[str, float]:
    """The positions the bug's mask keeps are all padding; the twin's are all real tokens."""
    out = {}
    x, y = token_batch(32 + 8 * (seed % 3), seed, ignore=None)
    for bug in (True, False):
        kept = (y == PAD) if bug else (y != PAD)
        out[bug] = float((y[kept] == PAD).float().mean())
    assert out[True] == 1.0 and out[False] == 0.0, out
    return {"pad_share_kept_bug": out[True], "pad_share_kept_ok": out[False]}


# 14. ignore_index set to a real class
def _ignore_real_class(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(256, c, d, seed)
    loss = (lambda z, t: F.cross_entropy(z, t, ignore_index=0)) if bug else F.cross_entropy
    return dict(model=MLP(d, c), loss_fn=loss, batch=(x[:64], y[:64]), num_classes=c, optimizer_factory=adam())


def _prove_ignore_real_class(seed: int) -> dict[str, float]:
    """Trained with ignore_index=0, the model never learns class 0: its recall there is far below the twin's."""
    out = {}
    c, d = sizes(seed)
    xv, yv = clusters(512, c, d, seed + 100)
    for bug in (True, False):
        kw = _seeded(_ignore_real_class)(bug, seed)
        x, y = clusters(1024, c, d, seed)
        torch.manual_seed(seed)
        model = MLP(d, c)
        train(model, [(x[i:i + 64], y[i:i + 64]) for i in range(0, 1024, 64)], 200, loss_fn=kw["loss_fn"])
        with torch.no_grad():
            pred = model(xv).argmax(1)
        out[bug] = float((pred[yv == 0] == 0).float().mean())
    assert out[True] < 0.2 and out[False] > 0.8, out
    return {"class0_recall_bug": out[True], "class0_recall_ok": out[False]}


# 15. labels 1..C with an extra output unit to make the loss accept them
def _one_based(bug: bool, seed: int) -> dict[str, Any]:
    c, d = sizes(seed)
    x, y = clusters(256, c, d, seed)
    return dict(model=MLP(d, c + 1 if bug else c), loss_fn=F.cross_entropy, batch=(x[:64], y[:64] + int(bug)),
                num_classes=c, optimizer_factory=adam())


def _prove_one_based(seed: int) -> dict[str, float]:
    """Label 0 never occurs and label C does: the labels are shifted by one against num_classes."""
    out = {}
    for bug in (True, False):
        kw = _seeded(_one_based)(bug, seed)
        y = kw["batch"][1]
        out[bug] = (int((y == 0).sum()), int((y == kw["num_classes"]).sum()))
    assert out[True][0] == 0 and out[True][1] > 0 and out[False][1] == 0, out
    return {"label_C_count_bug": out[True][1]}


# 16. regression data sorted by its target, unshuffled
def _sorted_regression(bug: bool, seed: int) -> dict[str, Any]:
    _, d = sizes(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1024, d, generator=g)
    w = torch.randn(d, 1, generator=torch.Generator().manual_seed(3)) / math.sqrt(d)
    y = x @ w + 0.1 * torch.randn(1024, 1, generator=g)
    if bug:
        order = y[:, 0].argsort()
        x, y = x[order], y[order]
    data = loader(x, y, 32, shuffle=not bug, seed=seed)
    model = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 1))
    return dict(model=model, loss_fn=F.mse_loss, batch=next(iter(data)), loader=data, optimizer_factory=adam())


def _prove_sorted_regression(seed: int) -> dict[str, float]:
    """One epoch over target-sorted batches leaves a far larger validation error than the shuffled twin's."""
    out = {}
    _, d = sizes(seed)
    g = torch.Generator().manual_seed(seed + 100)
    xv = torch.randn(512, d, generator=g)
    yv = xv @ (torch.randn(d, 1, generator=torch.Generator().manual_seed(3)) / math.sqrt(d))
    for bug in (True, False):
        kw = _seeded(_sorted_regression)(bug, seed)
        torch.manual_seed(seed)
        model = kw["model"]
        train(model, kw["loader"], len(kw["loader"]), lr=1e-2, loss_fn=F.mse_loss)
        with torch.no_grad():
            out[bug] = float(F.mse_loss(model(xv), yv))
    assert out[True] > 3 * out[False], out
    return {"val_mse_sorted": out[True], "val_mse_shuffled": out[False]}


CASES = {c.name: c for c in [
    Case("raw_pixels", "inputs", ("fail",), "raw 0-255 pixels", _seeded(_raw_pixels), _prove_raw_pixels),
    Case("unscaled_feature", "inputs", ("warn", "fail"), "features 3", _seeded(_unscaled_feature),
         _prove_unscaled_feature),
    Case("shuffled_labels", "label_probe", ("warn",), "shuffled separately", _seeded(_shuffled), _prove_shuffled,
         slow_proof=True),
    Case("label_in_features", "feature_leak", ("fail",), "alone determines the label", _seeded(_leak), _prove_leak),
    Case("class_sorted_loader", "class_mix", ("warn",), "class-sorted", _seeded(_sorted), _prove_sorted,
         slow_proof=True),
    Case("val_taken_from_train", "val_overlap", ("fail",), "exact copies of training examples", _seeded(_overlap),
         _prove_overlap),
    Case("dropout_on_in_evaluate", "eval_determinism", ("fail",), "model.eval() is missing", _seeded(_dropout_eval),
         _prove_eval_twice(_seeded(_dropout_eval))),
    Case("batchnorm_train_mode_in_evaluate", "eval_determinism", ("fail",), "BatchNorm normalizes with each "
         "validation batch", _seeded(_bn_eval), _prove_bn_eval),
    Case("functional_dropout_always_on", "eval_determinism", ("fail",), "eval-mode forward is random",
         _seeded(_functional_dropout), _prove_functional_dropout),
    Case("val_not_normalized", "inputs", ("warn",), "not preprocessed like the training data",
         _seeded(_val_unnormalized), _prove_val_unnormalized, slow_proof=True),
    Case("batchnorm_momentum_zero", "batchnorm_stats", ("fail",), "momentum 0", _seeded(_bn_frozen),
         _prove_bn_frozen),
    Case("lm_padding_counted", "target_share", ("warn",), "padding counted in the loss", _seeded(_padding_counted),
         _prove_padding_counted),
    Case("lm_padding_mask_inverted", "target_share", ("fail",), "counts only the padding", _seeded(_mask_inverted),
         _prove_mask_inverted),
    Case("ignore_index_is_a_real_class", "target_share", ("warn",), "drops class 0", _seeded(_ignore_real_class),
         _prove_ignore_real_class, slow_proof=True),
    Case("one_based_labels", "labels", ("fail",), "1-based", _seeded(_one_based), _prove_one_based),
    Case("regression_sorted_by_target", "class_mix", ("warn",), "sorted by its target", _seeded(_sorted_regression),
         _prove_sorted_regression),
]}


def unclean(report):
    """Healthy means: no fail, no error; a warning only for BatchNorm's by-design train-mode coupling."""
    return {c.name: (c.status, c.message) for c in report.checks
            if c.status in ("fail", "error") or c.status == "warn" and c.details.get("cause") != "batchnorm_train_mode"}
