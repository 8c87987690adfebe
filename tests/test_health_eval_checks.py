"""Unit tests of the evaluation checks (sweeper/health/checks/eval.py, checks/batchnorm.py) and of preflight's
behaviour on odd data: val_overlap against the training sample's own repeats, eval_determinism with every
evaluate signature and its causes (train-mode layers, random subsets, an evaluate that raises), batchnorm_stats,
batches the data checks cannot read (never a raise), and a loss that refuses its targets (the error names the fix).

    python -m pytest -q tests/test_health_eval_checks.py
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sweeper.health import Thresholds, preflight
from tests.helpers.health_data_models import CNN, MLP, clusters, images, standardize
from tests.test_health_data_checks import DATA, data_only

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")


# ---- val_overlap -------------------------------------------------------------------------------------------------
def test_validating_on_the_training_batch_fails_and_discrete_repeats_are_expected():
    x, y = clusters(128, 4, 8, 0)
    same = data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4, val_data=(x[:32], y[:32]))["val_overlap"]
    assert same.status == "fail" and same.value == 1.0 and "validation batch 0 example 0" in same.message
    g = torch.Generator().manual_seed(0)
    bits = torch.randint(0, 2, (600, 4), generator=g).float()          # 16 possible inputs: repeats everywhere
    label = bits.sum(1).long() % 2
    vbits = torch.randint(0, 2, (200, 4), generator=g).float()
    report = data_only(MLP(4, 2), F.cross_entropy, (bits, label), num_classes=2,
                       val_data=(vbits, vbits.sum(1).long() % 2))["val_overlap"]
    assert report.status == "pass" and "as many as the training sample's own repeats" in report.message


def test_a_small_intended_overlap_can_be_accepted():
    x, y = clusters(256, 4, 8, 0)
    xv, yv = clusters(100, 4, 8, 1)
    xv[:3] = x[:3]
    report = data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4, val_data=(xv, yv))["val_overlap"]
    assert report.status == "fail" and report.details["matches"] == 3
    quiet = data_only(MLP(8, 4), F.cross_entropy, (x, y), num_classes=4, val_data=(xv, yv),
                      thresholds=Thresholds(val_overlap_min_share=0.05))["val_overlap"]
    assert quiet.status == "pass"


# ---- eval_determinism --------------------------------------------------------------------------------------------
def test_evaluate_signatures_and_results():
    x, y = clusters(64, 4, 8, 0)
    model = MLP(8, 4, dropout=0.5)

    def closure():                                                     # evaluate() over the caller's model
        model.eval()
        with torch.no_grad():
            out = {"loss": F.cross_entropy(model(x), y), "acc": (model(x).argmax(1) == y).float().mean()}
        model.train()
        return out

    def two_args(m, val):
        m.eval()
        with torch.no_grad():
            loss = F.cross_entropy(m(val[0]), val[1]).item()
        m.train()
        return loss
    for evaluate in (closure, two_args):
        check = data_only(model, F.cross_entropy, (x, y), num_classes=4, val_data=(x, y),
                          evaluate=evaluate)["eval_determinism"]
        assert check.status == "pass", check.message
    assert model.training


def test_mc_dropout_is_silenced_and_an_evaluate_that_raises_is_an_error_not_a_crash():
    x, y = clusters(64, 4, 8, 0)
    model = MLP(8, 4, dropout=0.5)

    def mc(m):
        with torch.no_grad():
            return F.cross_entropy(m(x), y).item()
    assert data_only(model, F.cross_entropy, (x, y), evaluate=mc)["eval_determinism"].status == "fail"
    quiet = data_only(model, F.cross_entropy, (x, y), evaluate=mc, thresholds=Thresholds(eval_train_mode="pass"))
    assert quiet["eval_determinism"].status == "pass"

    def broken(m):
        raise KeyError("val_loader")
    check = data_only(model, F.cross_entropy, (x, y), evaluate=broken)["eval_determinism"]
    assert check.status == "error" and "KeyError" in check.message
    with pytest.raises(TypeError, match="evaluate: expected a function"):
        data_only(model, F.cross_entropy, (x, y), evaluate=3.0)


def test_random_validation_subsets_are_named_as_such():
    x, y = clusters(256, 4, 8, 0)
    model = MLP(8, 4)

    def subset(m):
        idx = torch.randint(0, 256, (32,))                             # the global RNG, every call
        m.eval()
        with torch.no_grad():
            loss = F.cross_entropy(m(x[idx]), y[idx]).item()
        m.train()
        return loss
    check = data_only(model, F.cross_entropy, (x, y), evaluate=subset)["eval_determinism"]
    assert check.status == "warn" and "draws from the global RNG" in check.message


# ---- batchnorm_stats ---------------------------------------------------------------------------------------------
def test_batchnorm_stats_pass_on_a_healthy_cnn_and_skip_without_batchnorm():
    x, y = images(128, 4, 0)
    x = standardize(x)
    ok = data_only(CNN(4), F.cross_entropy, (x, y), num_classes=4, val_data=(x[:64], y[:64]))["batchnorm_stats"]
    assert ok.status == "pass" and "calibration forwards" in ok.message
    assert data_only(MLP(64, 4), F.cross_entropy, (x, y))["batchnorm_stats"].status == "skip"


# ---- no crash ----------------------------------------------------------------------------------------------------
class TextModel(nn.Module):
    """Takes a list of strings (tokenizes inside)."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.EmbeddingBag(256, 8), nn.Linear(8, 3)

    def forward(self, texts):
        ids = [torch.tensor([ord(ch) % 256 for ch in t]) for t in texts]
        offsets = torch.tensor([0] + [len(i) for i in ids[:-1]]).cumsum(0)
        return self.head(self.emb(torch.cat(ids), offsets))


@pytest.mark.parametrize("build", [
    lambda: (TextModel(), F.cross_entropy, (["ab", "cd", "ef", "gh"], torch.tensor([0, 1, 2, 0])), {}),
    lambda: (nn.GRU(3, 4, batch_first=True), lambda out, t: F.mse_loss(out[0][..., 0], t),
             (torch.randn(8, 5, 3), torch.randn(8, 5)), {}),
    lambda: (MLP(8, 4), F.cross_entropy, (torch.randn(8, 8), torch.randint(0, 4, (8,))),
             {"loader": [1, 2, 3], "val_data": "not data"}),
    lambda: (MLP(8, 4), F.cross_entropy, (torch.randn(8, 8), torch.randint(0, 4, (8,))),
             {"val_data": (torch.randn(8, 5), torch.randint(0, 4, (8,)))}),   # val of the wrong width
])
def test_odd_batches_never_raise_from_the_data_checks(build):
    model, loss, batch, extra = build()
    report = data_only(model, loss, batch, **extra)
    assert [c.name for c in report.checks] == list(DATA)
    for c in report.checks:
        assert c.status in ("pass", "warn", "fail", "skip", "error")
        if c.status == "skip":
            assert c.message                                           # with the reason
    assert not [c for c in report.errors if c.name not in ("eval_determinism", "batchnorm_stats")], str(report)


# ---- a loss that refuses its targets: the error names the fix --------------------------------------------------
@pytest.mark.parametrize("loss,targets,out,fix", [
    (F.cross_entropy, lambda y: y.int(), 3, "pass y.long()"),
    (lambda o, t: F.binary_cross_entropy_with_logits(o[:, 0], t), lambda y: (y > 0).long(), 1, "pass y.float()"),
    (F.cross_entropy, lambda y: y[:, None], 3, "pass y.squeeze(1)"),
])
def test_a_loss_that_refuses_the_targets_raises_with_the_fix(loss, targets, out, fix):
    x, y = torch.randn(32, 5), torch.randint(0, 3, (32,))
    with pytest.raises(RuntimeError, match="model/loss_fn failed on the batch") as err:
        preflight(nn.Linear(5, out), loss, (x, targets(y)))
    assert "The data checks say: targets" in str(err.value) and fix in str(err.value)
    assert str(err.value).count("pass y.") == 1                       # one fix, the one the loss asked for
