"""Issue 37, the run-level misses (tests/helpers/health_run_zoo.py): validation that is the training data under
another name (what evaluate reads, not only the val_data it is given), class weights that favour the frequent
classes, a debug subset or limit left on, labels wrapped by a narrow integer dtype, and no false alarm on a
BatchNorm MLP or a correctly weighted cross-entropy. Each bug is flagged by the check that names its cause and
is shown real by an independent measurement; each healthy twin is quiet.

    python -m pytest -q tests/test_health_run_zoo.py -m "not slow"      # the proofs and the unit tests
    python -m pytest -q tests/test_health_run_zoo.py                    # + every case through preflight, 3 seeds
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sweeper.health import preflight
from sweeper.health.diagnosis import diagnose
from tests.helpers.health_data_zoo import unclean
from tests.helpers.health_run_zoo import CASES

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_bug_flagged_by_the_check_that_names_its_cause_and_twin_quiet(name, seed):
    case = CASES[name]
    report = preflight(**case.build(True, seed))
    check = report[case.caught_by]
    assert check.status in case.status and case.says in check.message, str(report)
    assert not report.errors, str(report)
    twin = preflight(**case.build(False, seed))
    assert unclean(twin) == {}, str(twin)


@pytest.mark.parametrize("name", list(CASES))
def test_bug_is_real(name):
    CASES[name].prove(0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_bug_is_real_on_other_seeds(name):
    for seed in (1, 2):
        CASES[name].prove(seed)


def test_a_failing_data_check_names_the_run_not_the_overfitting_it_causes():
    """Wrapped labels used to end as 'overfitting' (val rises while train falls); the labels check's named cause
    now wins the run's diagnosis, like every level-0 data finding."""
    labels = {"name": "labels", "status": "fail", "message": "labels wrapped by a narrow integer dtype: ...",
              "details": {"diagnosis": "labels_wrapped"}}
    overfit = {"name": "overfitting", "status": "warn", "message": "overfitting from step 200",
               "details": {"diagnosis": "overfitting", "step": 200}}
    d = diagnose([labels, overfit])
    assert d["name"] == "labels_wrapped" and d["kind"] == "bug" and d["invalidates"] is True
    assert "int64" in d["fix"]
    assert diagnose([overfit])["name"] == "overfitting"


def test_narrow_label_signatures_once_cast_back_to_int64():
    """The wrap is named from the values alone when the batch already holds int64: negative ids from int8 (the
    loss then refuses them and preflight's error carries the cause), ids that stop at 255 from uint8."""
    from tests.helpers.health_data_models import MLP, clusters, loader

    x, y = clusters(2048, 300, 16, 0)
    data = loader(x, y.to(torch.uint8).long(), 64, True, 0)
    report = preflight(MLP(16, 300), F.cross_entropy, next(iter(data)), num_classes=300, loader=data,
                       skip=["overfit_batch", "param_movement", "update_ratio", "stale_grad", "feature_leak",
                             "label_probe"])
    assert report["labels"].status == "fail" and "stop at 255, the top of uint8" in report["labels"].message
    data = loader(x, y.to(torch.int8).long(), 64, True, 0)
    with pytest.raises(RuntimeError, match="class ids >= 128 in int8 two's complement"):
        preflight(MLP(16, 300), F.cross_entropy, next(iter(data)), num_classes=300, loader=data)


def test_an_intended_subset_and_a_deliberate_cost_weighting_can_be_silenced():
    from sweeper.health import Thresholds

    kw = CASES["debug_subset_left_on"].build(True, 0)
    kw["skip"] = kw["skip"] + ["init_loss", "gradient_flow", "batch_independence", "feature_leak", "label_probe"]
    assert preflight(**kw)["data_coverage"].status == "fail"
    assert preflight(**kw, thresholds=Thresholds(train_fraction_fail=0))["data_coverage"].status == "pass"
    kw = CASES["class_weights_proportional_to_frequency"].build(True, 0)
    kw["skip"] = kw["skip"] + ["init_loss", "gradient_flow", "batch_independence", "feature_leak", "label_probe"]
    assert preflight(**kw, thresholds=Thresholds(class_weight_amplify=1e9))["class_weights"].status == "pass"


def test_an_evaluate_that_calls_model_x_targets_on_training_windows_is_named():
    """An LM-style forward, model(x, targets): the recorded calls are matched on x, as the training batch holds
    it; the healthy evaluate on its own windows passes. The recorder leaves no hook behind."""
    from torch import nn
    from torch.nn.modules import module as module_hooks

    class LM(nn.Module):
        def __init__(self, vocab: int = 16):
            super().__init__()
            self.emb, self.head = nn.Embedding(vocab, 16), nn.Linear(16, vocab)

        def forward(self, idx, targets=None):                               # (B, T) -> (B, T, V)
            return self.head(self.emb(idx))

    g = torch.Generator().manual_seed(0)
    x, xv = torch.randint(0, 16, (64, 12), generator=g), torch.randint(0, 16, (64, 12), generator=g)
    y, yv = x.roll(-1, 1), xv.roll(-1, 1)

    def lm_loss(logits, targets):
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    def make(ex, ey):
        def evaluate(model):
            model.eval()
            with torch.no_grad():
                loss = lm_loss(model(ex, ey), ey).item()
            model.train()
            return loss
        return evaluate
    only = ["val_overlap", "eval_determinism"]
    from sweeper.health.runner import CHECKS

    skip = [c for c in CHECKS if c not in only]
    bad = preflight(LM(), lm_loss, (x, y), num_classes=16, sequence_dim=1, val_data=(xv, yv), evaluate=make(x, y),
                    skip=skip)["val_overlap"]
    assert bad.status == "fail" and "evaluate scores the model on training data" in bad.message, bad.message
    assert "evaluate ignores its val_data argument" in bad.message
    good = preflight(LM(), lm_loss, (x, y), num_classes=16, sequence_dim=1, val_data=(xv, yv),
                     evaluate=make(xv, yv), skip=skip)["val_overlap"]
    assert good.status == "pass", good.message
    assert not module_hooks._global_forward_pre_hooks and not module_hooks._global_forward_hooks
