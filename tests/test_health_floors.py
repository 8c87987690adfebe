"""loss_floors: the references of the overfit check, against closed forms.

    python -m pytest -q tests/test_health_floors.py
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from sweeper.health.common.loss_floors import loss_floors

C = 6
LABELS = torch.tensor([0, 1, 2, 3])                       # 4 distinct labels: a shared output scores ln 4


def logits(seed=0):
    return torch.randn(4, C, generator=torch.Generator().manual_seed(seed))


@pytest.mark.slow
def test_plain_cross_entropy_can_reach_zero():
    f = loss_floors(F.cross_entropy, logits(), LABELS)
    assert f.constant == pytest.approx(math.log(4), abs=1e-4)
    assert f.free < 1e-3 and f.saturating                   # zero, approached at infinite logits


@pytest.mark.slow
def test_label_smoothing_floor_is_the_target_entropy_at_finite_logits():
    eps = 0.1
    f = loss_floors(lambda o, t: F.cross_entropy(o, t, label_smoothing=eps), logits(), LABELS)
    q_true, q_other = 1 - eps + eps / C, eps / C           # the smoothed target distribution
    entropy = -(q_true * math.log(q_true) + (C - 1) * q_other * math.log(q_other))
    assert f.free == pytest.approx(entropy, rel=1e-4)
    assert not f.saturating


@pytest.mark.slow
def test_softmax_before_cross_entropy_has_a_saturating_floor():
    f = loss_floors(lambda o, t: F.cross_entropy(o.softmax(-1), t), logits(), LABELS)
    assert f.free == pytest.approx(math.log(math.e + C - 1) - 1, abs=2e-3)   # probabilities one-hot at best
    assert f.saturating


def test_broadcast_loss_cannot_beat_a_shared_output():
    y = torch.tensor([1.0, 2.0, 4.0, 7.0])
    f = loss_floors(lambda pred, t: ((pred - t) ** 2).mean(), torch.zeros(4, 1), y)   # (B,1) - (B,) -> (B,B)
    assert f.constant == pytest.approx(float(y.var(unbiased=False)), rel=1e-6)
    assert f.free == pytest.approx(f.constant, rel=1e-6)
    fixed = loss_floors(lambda pred, t: ((pred.squeeze(-1) - t) ** 2).mean(), torch.zeros(4, 1), y)
    assert fixed.free < 1e-8 and fixed.constant == pytest.approx(f.constant, rel=1e-6)


def test_loss_that_rejects_substituted_outputs_gives_none():
    def picky(outputs, targets):
        raise ValueError("needs the model's own output object")
    assert loss_floors(picky, logits(), LABELS) is None
