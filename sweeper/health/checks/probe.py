"""Do the labels belong to their inputs? Two checks on the pooled training examples (the preflight batch and the
first loader batches, one label per example):

feature_leak  one input feature alone determines the label: it takes one value per class (within-class spread
              below `leak_within_ratio` of the spread between the class means, and the classes do not overlap).
              That is the label written into the inputs (a target column left among the features, a pixel or
              token set from the label), not a feature a model should need to learn.
label_probe   a cheap held-out probe: ridge regression and nearest neighbours fitted on one half of the examples,
              scored on the other half (and the other way round). Labels shuffled apart from their inputs leave
              every probe at chance; the check warns when even the upper confidence bound (z =
              `probe_z`) of the best probe's skill, (accuracy - majority rate) / (1 - majority rate), stays below
              `probe_min_skill`. Few examples give a wide bound: then it says the data are too few to judge.
              Regression targets: the held-out correlation, skill = r^2.

    result = label_probe_check(ctx)
"""
from __future__ import annotations

import math

import numpy as np
import torch

from sweeper.health.common.data_sources import concat_examples, label_view, pooled
from sweeper.health.result import CheckResult

_MAX_PROBE_DIMS = 256


class Examples:
    """Pooled per-example features of the training batches: `raw` (n, F) values for the leak check, `probe`
    (n, F') standardized features for the probe (integer ids as bag-of-ids counts), labels `y`."""

    def __init__(self, ctx):
        self.reason = ""
        kept, note = pooled(ctx.train_batches)
        self.note = note
        self.kind, self.y, self.raw, self.names, self.probe = "none", None, None, [], None
        if not kept:
            self.reason = "no batch with tensor inputs"
            return
        inputs, targets = concat_examples(kept)
        self.kind, y = label_view(targets, ctx.num_classes)
        if self.kind not in ("classes", "regression"):
            self.reason = {"sequence": "the targets hold a label per position (token prediction, tagging): these "
                                       "checks judge one label per example",
                           "none": "no tensor targets"}[self.kind]
            return
        if not inputs:
            self.reason = "no input tensor with one row per example"
            return
        n = len(y)
        g = torch.Generator().manual_seed(ctx.seed)
        order = torch.randperm(n, generator=g)[:ctx.thresholds.probe_max_examples]
        self.y = y[order]
        raws, probes = [], []
        for name, t in inputs:
            if t.dtype == torch.bool or t.is_complex():
                continue
            t = t[order].reshape(len(order), -1)
            if t.shape[1] == 0:
                continue
            raws.append(t.double())
            self.names += [(name, j) for j in range(t.shape[1])]
            if t.is_floating_point():
                probes.append(t.double())
            else:
                probes.append(_bag_of_ids(t))
        self.shapes = {name: tuple(tt.shape[1:]) for name, tt in inputs}
        if not raws:
            self.reason = "no numeric input tensor"
            return
        self.raw = torch.cat(raws, 1)
        x = torch.cat(probes, 1)
        x = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
        std = x.std(0)
        x = (x[:, std > 0] - x[:, std > 0].mean(0)) / std[std > 0]
        if x.shape[1] > _MAX_PROBE_DIMS:                      # random projection keeps distances and margins
            proj = torch.randn(x.shape[1], _MAX_PROBE_DIMS, generator=g, dtype=torch.float64)
            x = x @ proj / math.sqrt(_MAX_PROBE_DIMS)
        self.probe = x

    def feature_name(self, j: int) -> str:
        name, flat = self.names[j]
        shape = self.shapes.get(name, ())
        if len(shape) <= 1:
            return f"{name}[:, {flat}]"
        idx = np.unravel_index(flat, shape)
        return f"{name}[:, {', '.join(str(int(i)) for i in idx)}]"


def _bag_of_ids(t: torch.Tensor) -> torch.Tensor:
    """(n, L) integer ids -> (n, V) counts (hashed into 1024 buckets when the ids are large or negative)."""
    t = t.long()
    if int(t.min()) < 0 or int(t.max()) >= 4096:
        t = t.remainder(1024)
    width = int(t.max()) + 1
    out = torch.zeros(t.shape[0], width, dtype=torch.float64)
    out.scatter_add_(1, t, torch.ones_like(t, dtype=torch.float64))
    return out


# ---- feature_leak ------------------------------------------------------------------------------------------------
def feature_leak_check(ctx, ex: Examples) -> CheckResult:
    th = ctx.thresholds
    expected = f"within-class / between-class spread >= {th.leak_within_ratio:g} for every feature"
    if ex.raw is None or ex.kind != "classes":
        return CheckResult("feature_leak", "skip", None, "", f"not run: {ex.reason or 'regression targets'}")
    y = ex.y
    ok = y >= 0
    x, y = ex.raw[ok], y[ok]
    values, inverse, counts = torch.unique(y, return_inverse=True, return_counts=True)
    keep = counts >= th.leak_min_per_class
    if int(keep.sum()) < 2:
        return CheckResult("feature_leak", "skip", None, "",
                           f"not run: fewer than 2 classes with {th.leak_min_per_class} examples each among "
                           f"{len(y)} examples (pass loader=... for more batches)")
    rows = keep[inverse]
    x, inverse = x[rows], torch.cumsum(keep.long(), 0)[inverse[rows]] - 1
    values, counts = values[keep], counts[keep]
    x = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
    onehot = torch.nn.functional.one_hot(inverse, len(values)).double()          # (n, C)
    means = onehot.T @ x / counts[:, None].double()                                # (C, F)
    within = (x - means[inverse]).pow(2).mean(0).sqrt()                            # (F,)
    grand = x.mean(0)
    between = ((counts[:, None].double() * (means - grand) ** 2).sum(0) / len(x)).sqrt()
    ratio = torch.where(between > 0, within / between.clamp(min=1e-300), torch.full_like(within, math.inf))
    sorted_means = means.sort(0).values
    gaps = (sorted_means[1:] - sorted_means[:-1]).min(0).values                   # (F,) closest two classes
    leaks = ((ratio < th.leak_within_ratio) & (gaps > 6 * within)).nonzero().flatten()
    details = {"examples": len(x), "classes": len(values)}
    if len(leaks):
        j = int(leaks[ratio[leaks].argmin()])
        pairs = ", ".join(f"class {int(values[c])} -> {float(means[c, j]):.4g}" for c in range(min(len(values), 4)))
        details.update(feature=ex.feature_name(j), ratio=float(ratio[j]), leaking=len(leaks))
        more = f" ({len(leaks) - 1} more features do the same)" if len(leaks) > 1 else ""
        return CheckResult("feature_leak", "fail", float(ratio[j]), expected,
                           f"{ex.feature_name(j)} alone determines the label: it takes one value per class ({pairs}"
                           f"{', ...' if len(values) > 4 else ''}; spread within a class {float(within[j]):.2g} vs "
                           f"{float(between[j]):.2g} between classes){more}: the label is written into the inputs "
                           f"(the target column left among the features, a value set from the label) - drop it",
                           details)
    best = int(ratio.argmin())
    return CheckResult("feature_leak", "pass", float(ratio[best]), expected,
                       f"no single feature determines the label ({len(x)} examples, {len(values)} classes; the "
                       f"closest, {ex.feature_name(best)}, spreads {float(ratio[best]):.2g}x as much within a class "
                       f"as between classes)", details)


# ---- label_probe -------------------------------------------------------------------------------------------------
def _wilson_upper(p: float, n: int, z: float) -> float:
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + half) / (1 + z * z / n))


def _folds(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + 1))
    a, b = perm[: n // 2], perm[n // 2:]
    return [(a, b), (b, a)]


def _ridge(x_tr: torch.Tensor, y_tr: torch.Tensor, x_te: torch.Tensor) -> torch.Tensor:
    xt = torch.cat([x_tr, torch.ones(len(x_tr), 1, dtype=x_tr.dtype)], 1)
    xe = torch.cat([x_te, torch.ones(len(x_te), 1, dtype=x_te.dtype)], 1)
    lam = 0.1 * len(x_tr)
    eye = torch.eye(xt.shape[1], dtype=xt.dtype)
    eye[-1, -1] = 0
    w = torch.linalg.solve(xt.T @ xt + lam * eye, xt.T @ y_tr)
    return xe @ w


def _neighbours(x_tr: torch.Tensor, x_te: torch.Tensor, k: int) -> torch.Tensor:
    d = torch.cdist(x_te, x_tr)                                                    # (n_te, n_tr)
    return d.topk(min(k, x_tr.shape[0]), largest=False).indices                   # (n_te, k)


def label_probe_check(ctx, ex: Examples) -> CheckResult:
    th = ctx.thresholds
    if ex.probe is None:
        return CheckResult("label_probe", "skip", None, "", f"not run: {ex.reason}")
    n = len(ex.y)
    classes = int(torch.unique(ex.y).numel()) if ex.kind == "classes" else 1
    need = max(th.probe_min_examples, th.probe_min_per_class * classes)
    if n < need or ex.probe.shape[1] == 0:
        return CheckResult("label_probe", "skip", None, "",
                           f"not run: {n} examples ({ex.probe.shape[1]} varying features) are too few for a held-out "
                           f"probe; it needs {need} (pass loader=<your DataLoader> for more batches)")
    if ex.kind == "classes":
        return _classify(ctx, ex, n, th)
    return _regress(ctx, ex, n, th)


def _classify(ctx, ex: Examples, n: int, th) -> CheckResult:
    values, y = torch.unique(ex.y, return_inverse=True)
    c = len(values)
    if c < 2:
        return CheckResult("label_probe", "skip", None, "", "not run: one class only (see labels)")
    correct = {"ridge": 0, "1-nn": 0, "5-nn": 0}
    for tr, te in _folds(n, ctx.seed):
        x_tr, x_te, y_tr, y_te = ex.probe[tr], ex.probe[te], y[tr], y[te]
        onehot = torch.nn.functional.one_hot(y_tr, c).double()
        correct["ridge"] += int((_ridge(x_tr, onehot, x_te).argmax(1) == y_te).sum())
        nn_idx = _neighbours(x_tr, x_te, 5)
        correct["1-nn"] += int((y_tr[nn_idx[:, 0]] == y_te).sum())
        votes = torch.nn.functional.one_hot(y_tr[nn_idx], c).sum(1).double()
        votes += 1e-3 * torch.nn.functional.one_hot(y_tr[nn_idx[:, 0]], c)        # ties: the nearest decides
        correct["5-nn"] += int((votes.argmax(1) == y_te).sum())
    best = max(correct, key=correct.get)
    # chance: the best a prediction that ignores the inputs can do, i.e. the overall majority rate (a train fold's
    # majority is a minority of its test fold on balanced data, which would set the bar too low)
    acc, chance = correct[best] / n, float(torch.bincount(y, minlength=c).max()) / n
    upper = _wilson_upper(acc, n, th.probe_z)
    denom = max(1 - chance, 1e-9)
    skill, skill_upper = (acc - chance) / denom, (upper - chance) / denom
    details = {"examples": n, "accuracy": {k: v / n for k, v in correct.items()}, "majority_rate": chance,
               "skill": skill, "skill_upper": skill_upper}
    return _verdict(th, skill, skill_upper, details, warn=(
        f"labels do not match their inputs: a probe fitted on half of {n} examples (ridge, nearest neighbours) "
        f"predicts the other half's labels at {acc:.1%}, no better than always guessing the majority class "
        f"({chance:.1%}); even its upper confidence bound is {skill_upper:.2f} of the way to perfect. Inputs and "
        f"labels were most likely shuffled separately (shuffle one index and apply it to both) or are misaligned "
        f"(a sort or offset applied to one of them)"),
        inconclusive=f"held-out probe accuracy {acc:.0%} vs {chance:.0%} majority rate on only {n} examples",
        passed=f"a held-out {best} probe predicts {acc:.0%} of labels ({chance:.0%} by the majority class) on "
               f"{n} examples")


def _verdict(th, skill: float, skill_upper: float, details: dict, warn: str, inconclusive: str,
             passed: str) -> CheckResult:
    """The probe's ladder for labels and targets alike: warn when even the skill's upper bound is below the
    threshold, skip when too few examples leave the bound wide, else pass."""
    expected = f"skill upper bound >= {th.probe_min_skill:g}"
    if th.probe_min_skill > 0 and skill_upper < th.probe_min_skill:
        return CheckResult("label_probe", "warn", skill, expected,
                           f"{warn}. If no simple probe can learn this task, silence it with "
                           f"+health.thresholds.probe_min_skill=0", details)
    if skill_upper - skill > 0.5 and skill < th.probe_min_skill * 2:
        return CheckResult("label_probe", "skip", skill, expected,
                           f"inconclusive: {inconclusive} (pass loader=... for more batches)", details)
    return CheckResult("label_probe", "pass", skill, expected, passed, details)


def _regress(ctx, ex: Examples, n: int, th) -> CheckResult:
    y = ex.y.double()
    y = torch.where(torch.isfinite(y), y, torch.zeros_like(y))
    if not bool((y.std(0) > 0).any()):
        return CheckResult("label_probe", "skip", None, "", "not run: constant targets")
    preds = {"ridge": torch.zeros_like(y), "5-nn": torch.zeros_like(y)}
    for tr, te in _folds(n, ctx.seed):
        preds["ridge"][te] = _ridge(ex.probe[tr], y[tr], ex.probe[te])
        preds["5-nn"][te] = y[tr][_neighbours(ex.probe[tr], ex.probe[te], 5)].mean(1)
    corr = {}
    for name, p in preds.items():
        pc, yc = p - p.mean(0), y - y.mean(0)
        r = (pc * yc).sum(0) / (pc.norm(dim=0) * yc.norm(dim=0)).clamp(min=1e-300)
        corr[name] = float(r.max())
    best = max(corr, key=corr.get)
    r = max(min(corr[best], 0.999999), -0.999999)
    upper = math.tanh(math.atanh(r) + th.probe_z / math.sqrt(max(n - 3, 1)))
    skill, skill_upper = max(r, 0.0) ** 2, max(upper, 0.0) ** 2
    details = {"examples": n, "correlation": corr, "skill": skill, "skill_upper": skill_upper}
    return _verdict(th, skill, skill_upper, details, warn=(
        f"targets do not match their inputs: a probe fitted on half of {n} examples predicts the other half's "
        f"targets with correlation {r:.2f} (upper bound {upper:.2f}): inputs and targets were most likely shuffled "
        f"separately or are misaligned"),
        inconclusive=f"held-out correlation {r:.2f} on only {n} examples",
        passed=f"a held-out {best} probe predicts the targets with correlation {r:.2f} on {n} examples")
