"""Unit tests of the data checks (sweeper/health/checks/inputs|labels|probe.py, data_sources.py): each check's
verdicts on small hand-made cases and the legitimate setups it must accept (token ids, a model that normalizes
its own inputs, a normalization layer first, masked-LM shares, ignored examples, a threshold task, bags of ids).
The evaluation checks and odd batches: tests/test_health_eval_checks.py.

    python -m pytest -q tests/test_health_data_checks.py
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from sweeper.health import Thresholds, preflight
from sweeper.health.common.data_sources import is_batch, label_view, read_batches
from tests.helpers.health_data_models import CNN, MLP, TinyLM, clusters, images, lm_loss, standardize, token_batch

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")

DATA = ("inputs", "labels", "target_share", "class_weights", "feature_leak", "label_probe", "class_mix",
        "data_coverage", "val_overlap", "eval_determinism", "batchnorm_stats")
OTHERS = ["init_loss", "gradient_flow", "overfit_batch", "param_movement", "update_ratio", "stale_grad",
          "batch_independence", "causality", "target_shift", "kernel_agreement"]


def data_only(*args, **kwargs):
    """preflight with only the data/evaluation checks (fast)."""
    return preflight(*args, skip=OTHERS, **kwargs)


def statuses(report):
    return {c.name: c.status for c in report.checks}


# ---- data_sources ------------------------------------------------------------------------------------------------
def test_batch_or_iterable_of_batches():
    x, y = torch.zeros(4, 3), torch.zeros(4)
    assert is_batch((x, y)) and is_batch([x, y]) and is_batch({"inputs": x, "targets": y})
    assert is_batch(((x, x), y))                                      # a two-input model's batch
    assert not is_batch([(x, y), (x, y)]) and not is_batch(DataLoader(TensorDataset(x, y), batch_size=2))
    batches, note = read_batches([(x, y), "junk", (x, y)], 8)
    assert len(batches) == 1 and "item 1 is str" in note
    batches, note = read_batches(42, 8)
    assert batches == [] and "expected a batch or an iterable" in note


def test_reading_a_loader_leaves_its_order_and_the_global_rng_alone():
    x, y = clusters(256, 4, 8, 0)

    def fresh():
        return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(3))
    seen, model = fresh(), MLP(8, 4)
    torch.manual_seed(5)
    rng = torch.get_rng_state()
    data_only(model, F.cross_entropy, (x[:32], y[:32]), num_classes=4, loader=seen)
    assert torch.equal(torch.get_rng_state(), rng)
    for (a, _), (b, _) in zip(seen, fresh()):
        assert torch.equal(a, b)
    unseeded = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)   # draws from the global RNG
    torch.manual_seed(5)
    data_only(model, F.cross_entropy, (x[:32], y[:32]), num_classes=4, loader=unseeded)
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize("targets,num_classes,kind", [
    (torch.tensor([0, 2, 1]), None, "classes"),
    (torch.tensor([[0], [2], [1]]), None, "classes"),
    (torch.tensor([0.0, 1.0, 1.0]), None, "classes"),                  # BCE labels
    (torch.tensor([0.0, 3.0, 1.0]), 4, "classes"),                     # float class indices
    (torch.tensor([0.5, 3.2, 1.0]), None, "regression"),
    (torch.eye(3), 3, "classes"),                                      # one-hot rows
    (torch.randint(0, 5, (3, 7)), 5, "sequence"),
    (None, 3, "none"),
    ({"labels": torch.zeros(3)}, 3, "none"),
])
def test_label_view(targets, num_classes, kind):
    assert label_view(targets, num_classes)[0] == kind


# ---- inputs ------------------------------------------------------------------------------------------------------
def test_token_ids_are_indices_not_numbers():
    x, y = token_batch(16, 0)
    report = data_only(TinyLM(), lm_loss, (x, y), num_classes=16, sequence_dim=1)
    assert report["inputs"].status == "pass" and "integer ids" in report["inputs"].message


class Normalizing(nn.Module):
    """Takes raw uint8 pixels and scales them itself."""

    def __init__(self, classes):
        super().__init__()
        self.net = MLP(64, classes)

    def forward(self, x):
        return self.net(x.float() / 255)


def test_a_model_that_scales_its_own_raw_pixels_is_fine_and_one_that_does_not_is_named():
    x, y = images(64, 4, 0)
    raw = (x * 255).round().to(torch.uint8)
    ok = data_only(Normalizing(4), F.cross_entropy, (raw, y), num_classes=4)
    assert ok["inputs"].status == "pass" and "after the model's own preprocessing" in ok["inputs"].message

    class Cast(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = MLP(64, 4)

        def forward(self, x):
            return self.net(x.float())
    bad = data_only(Cast(), F.cross_entropy, (raw, y), num_classes=4)
    assert bad["inputs"].status == "warn" and "raw 0-255 pixels" in bad["inputs"].message


def test_a_normalization_layer_first_standardizes_for_the_model():
    x, y = clusters(64, 4, 8, 0)
    model = nn.Sequential(nn.Flatten(), nn.BatchNorm1d(8), nn.Linear(8, 4))
    report = data_only(model, F.cross_entropy, (1000 + 50 * x, y), num_classes=4)
    assert report["inputs"].status == "pass" and "normalized by the model's first layer 1" in report["inputs"].message


def test_nan_inputs_fail_and_name_the_example():
    x, y = clusters(32, 4, 8, 0)
    x[5, 2] = float("nan")
    report = data_only(nn.Linear(8, 4), F.cross_entropy, (x, y), num_classes=4)
    assert report["inputs"].status == "fail" and "first in example 5" in report["inputs"].message


def test_dict_and_tuple_inputs_are_judged_by_name():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.fc, self.head = nn.Embedding(16, 8), nn.Linear(8, 8), nn.Linear(16, 4)

        def forward(self, ids, feats):
            return self.head(torch.cat([self.emb(ids).mean(1), self.fc(feats)], 1))
    x, y = clusters(64, 4, 8, 0)
    ids = torch.randint(0, 16, (64, 5))
    report = data_only(Two(), F.cross_entropy, ({"ids": ids, "feats": 500 * x}, y), num_classes=4)
    msg = report["inputs"].message
    assert report["inputs"].status == "warn" and "inputs['feats']" in msg and "inputs['ids']" not in msg.split(":")[0]
    report = data_only(Two(), F.cross_entropy, ((ids, x), y), num_classes=4)
    assert report["inputs"].status == "pass" and "inputs[0]: integer ids" in report["inputs"].message


def test_offset_and_tiny_scales_are_named_and_thresholds_silence_them():
    x, y = clusters(64, 4, 8, 0)
    assert data_only(nn.Linear(8, 4), F.cross_entropy, (x * 1e-4, y))["inputs"].message.count("too small") == 1
    off = data_only(nn.Linear(8, 4), F.cross_entropy, (x * 0.1 + 50, y))["inputs"]
    assert off.status == "warn" and "offset far from 0" in off.message
    quiet = data_only(nn.Linear(8, 4), F.cross_entropy, (x * 0.1 + 50, y),
                      thresholds=Thresholds(input_offset_ratio=1e9, input_scale_high=1e9))
    assert quiet["inputs"].status == "pass"


# ---- labels ------------------------------------------------------------------------------------------------------
def test_a_dominating_class_missing_classes_and_a_single_class_are_named():
    x, _ = clusters(200, 4, 8, 0)
    y = torch.zeros(200, dtype=torch.long)
    y[:10] = 1
    dom = data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4)["labels"]
    assert dom.status == "warn" and "class 0 is 95%" in dom.message and "classes 2..3 never appear" in dom.message
    one = data_only(MLP(8, 4), F.cross_entropy, (x, torch.full((200,), 3)), num_classes=4)["labels"]
    assert one.status == "warn" and "are class 3" in one.message
    few = data_only(MLP(8, 4), F.cross_entropy, (x[:3], torch.full((3,), 3)), num_classes=4)["labels"]
    assert few.status == "pass"                                       # 3 equal labels are chance, not a finding
    assert data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4,
                     thresholds=Thresholds(label_dominant_share=1.0,
                                           label_min_per_class_seen=1e9))["labels"].status == "pass"


def test_validation_labels_out_of_range_fail():
    x, y = clusters(64, 4, 8, 0)
    report = data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4, val_data=(x, y + 1))
    assert report["labels"].status == "fail" and "validation targets go up to 4" in report["labels"].message


def test_regression_targets_and_missing_targets_are_not_judged_as_classes():
    x, _ = clusters(64, 4, 8, 0)
    reg = data_only(nn.Linear(8, 1), F.mse_loss, (x, x[:, :1] * 2))
    assert reg["labels"].status == "pass" and "regression" in reg["labels"].message
    bad = torch.full((64, 1), 1.0)
    bad[3] = float("inf")
    assert data_only(nn.Linear(8, 1), F.mse_loss, (x, bad))["labels"].status == "fail"
    bad[3] = float("nan")
    assert data_only(nn.Linear(8, 1), F.mse_loss, (x, bad))["labels"].status == "fail"

    def masked_mse(out, t):                                            # missing values as NaN, masked out
        keep = torch.isfinite(t)
        return F.mse_loss(out[keep], t[keep])
    missing = x[:, :1].clone()
    missing[::4] = float("nan")
    masked = data_only(nn.Linear(8, 1), masked_mse, (x, missing))
    assert masked["labels"].status == "pass" and masked["target_share"].value == 0.75

    class AutoEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = nn.Linear(8, 3), nn.Linear(3, 8)

        def forward(self, x):
            return self.dec(self.enc(x)), x
    report = data_only(AutoEncoder(), lambda out, _: F.mse_loss(out[0], out[1]), (x, None))
    assert {n: report[n].status for n in ("labels", "target_share", "feature_leak", "label_probe")} == \
        dict.fromkeys(("labels", "target_share", "feature_leak", "label_probe"), "skip")
    assert not report.errors, str(report)


# ---- target_share ------------------------------------------------------------------------------------------------
def test_masked_lm_share_passes_and_all_ignored_fails():
    x, y = token_batch(32, 0)
    mlm = y.clone()
    keep = torch.rand(y.shape, generator=torch.Generator().manual_seed(0)) < 0.15
    mlm[~keep] = -100
    ok = data_only(TinyLM(), lm_loss, (x, mlm), num_classes=16)["target_share"]
    assert ok.status == "pass" and 0.05 < ok.value < 0.2
    none = data_only(TinyLM(), lm_loss, (x, torch.full_like(y, -100)), num_classes=16)["target_share"]
    assert none.status == "fail" and "-100 x" in none.message


def test_saturated_logits_do_not_look_ignored():
    """Huge inputs saturate the softmax (float32 gradient exactly 0 for confident examples): still counted."""
    x, y = clusters(64, 4, 8, 0)
    report = data_only(MLP(8, 4), F.cross_entropy, (x * 1e5, y), num_classes=4)
    assert report["target_share"].status == "pass" and report["target_share"].value == 1.0


def test_ignored_examples_with_a_negative_label_are_intended():
    x, y = clusters(64, 4, 8, 0)
    y[:5] = -100
    share = data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4)
    assert share["target_share"].status == "pass" and share["labels"].status == "pass"


# ---- feature_leak / label_probe ----------------------------------------------------------------------------------
def test_a_threshold_task_is_not_a_leak_but_a_copied_label_is():
    x = torch.randn(400, 6, generator=torch.Generator().manual_seed(0))
    y = (x[:, 0] > 0).long()                                           # one feature decides, legitimately
    legit = data_only(MLP(6, 2), F.cross_entropy, (x, y), num_classes=2)
    assert legit["feature_leak"].status == "pass" and legit["label_probe"].status == "pass"
    leaked = torch.cat([x, (y * 7.0 + 3)[:, None]], 1)                 # a class-constant column
    leak = data_only(MLP(7, 2), F.cross_entropy, (leaked, y), num_classes=2)["feature_leak"]
    assert leak.status == "fail" and "inputs[:, 6] alone determines the label" in leak.message
    assert "class 0 -> 3" in leak.message and "class 1 -> 10" in leak.message


def test_a_class_constant_feature_that_merges_classes_does_not_determine_the_label():
    x, y = clusters(400, 4, 6, 0)
    coarse = torch.cat([x, (y // 2).float()[:, None]], 1)             # 0,1 -> 0 and 2,3 -> 1: a hint, not the label
    report = data_only(MLP(7, 4), F.cross_entropy, (coarse, y), num_classes=4)["feature_leak"]
    assert report.status == "pass", report.message


def test_a_leaked_pixel_is_named_by_its_position():
    x, y = images(256, 4, 0)
    x = standardize(x)
    x[:, 0, 2, 5] = y.float()
    leak = data_only(CNN(4), F.cross_entropy, (x, y), num_classes=4)["feature_leak"]
    assert leak.status == "fail" and "inputs[:, 0, 2, 5]" in leak.message


def test_the_probe_needs_enough_examples_and_judges_regression_too():
    x, y = clusters(16, 4, 8, 0)
    few = data_only(MLP(8, 4), F.cross_entropy, (x, y[torch.randperm(16)]), num_classes=4)["label_probe"]
    assert few.status in ("pass", "skip")                              # 16 examples cannot show chance
    x = torch.randn(600, 8, generator=torch.Generator().manual_seed(1))
    t = x @ torch.randn(8, 1, generator=torch.Generator().manual_seed(2))
    ok = data_only(nn.Linear(8, 1), F.mse_loss, (x, t))["label_probe"]
    assert ok.status == "pass" and ok.value > 0.9
    shuffled = data_only(nn.Linear(8, 1), F.mse_loss, (x, t[torch.randperm(600)]))["label_probe"]
    assert shuffled.status == "warn" and "targets do not match their inputs" in shuffled.message
    quiet = data_only(nn.Linear(8, 1), F.mse_loss, (x, t[torch.randperm(600)]),
                      thresholds=Thresholds(probe_min_skill=0.0))["label_probe"]
    assert quiet.status != "warn"


def test_token_inputs_with_one_label_per_example_are_probed_as_bags_of_ids():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 16, (1024, 10), generator=g)               # binary labels: ~1000 examples to see chance
    y = (ids == 3).any(1).long()                                       # "does token 3 occur?"

    class Bag(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.head = nn.Embedding(16, 8), nn.Linear(8, 2)

        def forward(self, idx):
            return self.head(self.emb(idx).mean(1))
    ok = data_only(Bag(), F.cross_entropy, (ids, y), num_classes=2)
    assert ok["label_probe"].status == "pass" and ok["feature_leak"].status == "pass"
    bad = data_only(Bag(), F.cross_entropy, (ids, y[torch.randperm(1024, generator=g)]), num_classes=2)
    assert bad["label_probe"].status == "warn"


# ---- class_mix ---------------------------------------------------------------------------------------------------
def test_class_mix_needs_a_loader_and_sees_sorted_first_batches_against_the_dataset():
    x, y = clusters(512, 4, 8, 0)
    assert data_only(MLP(8, 4), F.cross_entropy, (x[:64], y[:64]), num_classes=4)["class_mix"].status == "skip"
    order = y.argsort(stable=True)
    sorted_loader = DataLoader(TensorDataset(x[order], y[order]), batch_size=16)
    report = data_only(MLP(8, 4), F.cross_entropy, next(iter(sorted_loader)), num_classes=4, loader=sorted_loader)
    mix = report["class_mix"]
    assert mix.status == "warn" and "drawn at random from its dataset hold 4 classes" in mix.message
    assert report["labels"].status == "pass" and "class-sorted" in report["labels"].message
    plain = [(x[i:i + 64], y[i:i + 64]) for i in range(0, 512, 64)]    # a list of batches: no dataset to sample
    assert data_only(MLP(8, 4), F.cross_entropy, plain[0], num_classes=4, loader=plain)["class_mix"].status == "pass"
