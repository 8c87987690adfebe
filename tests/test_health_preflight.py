"""preflight() on models the zoo never showed it: CNN + BatchNorm + dropout, weight tying, dict outputs with a
loss that shifts internally, causal and non-causal convolutions and GRUs on float sequences; the API contract
(model, grads, mode and RNG left untouched; one-line errors); and the checks' naming of what is wrong.

    python -m pytest -q tests/test_health_preflight.py
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sweeper.health import CHECKS, Thresholds, preflight

pytestmark = pytest.mark.usefixtures("one_thread")


def ce(logits, targets):
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten())


def not_passing(report):
    return {c.name: c.message for c in report.checks if c.status not in ("pass", "skip")}


# ---- models the checks have never seen ---------------------------------------------------------------------------
class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.drop, self.head = nn.Dropout(0.1), nn.Linear(16, 4)

    def forward(self, x):                                        # (B, 1, 8, 8)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))                      # (B, 16, 8, 8)
        return self.head(self.drop(x.mean(dim=(2, 3))))          # (B, 4)


class TiedLM(nn.Module):
    """nn.TransformerEncoderLayer with a causal mask, learned positions, head tied to the embedding."""

    def __init__(self, vocab=20, dim=32, context=12):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.1, batch_first=True)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight
        for table in (self.emb, self.pos):        # N(0, 1) tied into the head gives logits of std ~sqrt(dim)
            nn.init.normal_(table.weight, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        h = self.emb(idx) + self.pos(torch.arange(T))
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        return self.head(self.layer(h, src_mask=mask, is_causal=True))


class DictOutputLM(nn.Module):
    """HF style: returns {"logits": ...}; the caller's loss shifts labels=input_ids internally."""

    def __init__(self, vocab=20, dim=32):
        super().__init__()
        self.emb, self.gru, self.head = (
            nn.Embedding(vocab, dim),
            nn.GRU(dim, dim, batch_first=True),
            nn.Linear(dim, vocab),
        )

    def forward(self, input_ids):
        return {"logits": self.head(self.gru(self.emb(input_ids))[0]), "aux": torch.zeros(())}


def hf_loss(outputs, labels):
    logits = outputs["logits"][:, :-1]  # position t predicts token t+1
    return F.cross_entropy(logits.flatten(0, 1), labels[:, 1:].flatten())


class ConvSeq(nn.Module):
    """Float sequences (B, T, F) -> (B, T, 1); causal = pad on the left only."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal
        self.conv1, self.conv2 = nn.Conv1d(3, 16, 3), nn.Conv1d(16, 1, 3)

    def forward(self, x):
        h = x.transpose(1, 2)  # (B, F, T)
        for conv in (self.conv1, self.conv2):
            h = F.pad(h, (2, 0) if self.causal else (1, 1))
            h = conv(h) if conv is self.conv2 else F.relu(conv(h))
        return h.transpose(1, 2)  # (B, T, 1)


class GRUSeq(nn.Module):
    def __init__(self, bidirectional: bool):
        super().__init__()
        self.gru = nn.GRU(3, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 1)

    def forward(self, x):
        return self.head(self.gru(x)[0])


def mse(pred, target):
    return F.mse_loss(pred.squeeze(-1), target)


def lm_batch(vocab=20, n=8, T=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    tok = (torch.randint(0, vocab, (n, 1), generator=g) + torch.arange(T + 1)) % vocab
    return tok[:, :-1], tok[:, 1:]


def seq_batch(n=8, T=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, T, 3, generator=g)
    return x, x[..., 0].cumsum(1) / 3  # a causal target


def adam(lr):
    return lambda params: torch.optim.Adam(params, lr=lr)


# ---- healthy unseen models pass ------------------------------------------------------------------------------
@pytest.mark.slow
def test_cnn_with_batchnorm_and_dropout_passes_with_the_batchnorm_coupling_named():
    """Train-mode BatchNorm couples examples by design: named in a pass (never a leak FAIL, no false alarm on a
    healthy BatchNorm model, issue 37); batchnorm_coupling='warn' flags it where it matters."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 1, 8, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
    report = preflight(SmallCNN(), F.cross_entropy, (x, y), num_classes=4, optimizer_factory=adam(1e-2))
    coupling = report["batch_independence"]
    assert coupling.status == "pass" and coupling.details["cause"] == "batchnorm_train_mode"
    assert coupling.details["modes_checked"] == ["eval", "train"]
    assert "expected for BatchNorm" in coupling.message and "batchnorm_coupling='warn'" in coupling.message
    assert not_passing(report) == {}, str(report)
    flagged = preflight(
        SmallCNN(),
        F.cross_entropy,
        (x, y),
        num_classes=4,
        optimizer_factory=adam(1e-2),
        thresholds=Thresholds(batchnorm_coupling="warn"),
        skip=["overfit_batch"],
    )
    coupling = flagged["batch_independence"]
    assert coupling.status == "warn" and "batchnorm_coupling='pass'" in coupling.message, str(flagged)


def test_weight_tied_transformer_lm_passes():
    torch.manual_seed(0)
    report = preflight(TiedLM(), ce, lm_batch(), num_classes=20, sequence_dim=1, optimizer_factory=adam(3e-3))
    assert not_passing(report) == {}, str(report)
    assert report["causality"].status == "pass" and report["target_shift"].status == "pass"


def test_dict_outputs_with_internally_shifted_labels_pass():
    torch.manual_seed(0)
    tokens = lm_batch(T=13)[0]  # labels = input_ids, the loss shifts
    report = preflight(
        DictOutputLM(), hf_loss, (tokens, tokens), num_classes=20, sequence_dim=1, optimizer_factory=adam(1e-2)
    )
    assert not_passing(report) == {}, str(report)
    assert report["target_shift"].details["next_position_match"] == 1.0


@pytest.mark.parametrize("model", [ConvSeq(causal=True), GRUSeq(bidirectional=False)], ids=["conv", "gru"])
def test_causal_float_sequence_models_pass(model):
    report = preflight(model, mse, seq_batch(), sequence_dim=1, optimizer_factory=adam(1e-2))
    assert not_passing(report) == {}, str(report)
    assert report["causality"].status == "pass" and report["causality"].value == 0.0


@pytest.mark.parametrize(
    "model,ahead",
    [(ConvSeq(causal=False), 1), (GRUSeq(bidirectional=True), 1)],
    ids=["centered-conv", "bidirectional-gru"],
)
def test_non_causal_float_sequence_models_fail_causality(model, ahead):
    report = preflight(model, mse, seq_batch(), sequence_dim=1, skip=["overfit_batch"])
    check = report["causality"]
    assert check.status == "fail" and check.value > 1e-3
    assert f"({ahead} ahead, via input[0])" in check.message


# ---- the checks name what is wrong -----------------------------------------------------------------------------
class WithExtras(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(6, 16), nn.Linear(16, 3)
        self.unused = nn.Linear(6, 6)  # never called
        self.gate = nn.Parameter(torch.ones(16))  # used through .detach(): the graph is cut
        self.frozen = nn.Linear(6, 16).requires_grad_(False)  # deliberately frozen: not a finding

    def forward(self, x):
        return self.head(torch.tanh(self.body(x) + self.frozen(x)) * self.gate.detach())


def cls_batch(n=8, features=6, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, features, generator=g), torch.randint(0, classes, (n,), generator=g)


def test_gradient_flow_names_unused_and_detached_parameters_only():
    report = preflight(WithExtras(), F.cross_entropy, cls_batch(), num_classes=3, skip=["overfit_batch"])
    flow = report["gradient_flow"]
    assert flow.status == "fail" and flow.value == 3
    dead = sorted(d.split(":")[0] for d in flow.details["dead"])
    assert dead == ["gate", "unused.bias", "unused.weight"]
    assert "frozen" not in flow.message
    assert sorted(report["param_movement"].details["unchanged"]) == ["gate", "unused.bias", "unused.weight"]


@pytest.mark.slow
def test_parameter_missing_from_the_optimizer_never_moves():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    report = preflight(
        model,
        F.cross_entropy,
        cls_batch(),
        num_classes=3,
        optimizer_factory=lambda params: torch.optim.Adam(list(params)[:2], lr=1e-2),
    )
    move = report["param_movement"]
    assert move.status == "fail" and move.details["unchanged"] == ["2.weight", "2.bias"]
    assert report["gradient_flow"].status == "pass"


@pytest.mark.slow
def test_fused_projection_with_blocked_rows_is_named_with_the_rows():
    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.head = nn.Linear(8, 24), nn.Linear(8, 3)

        def forward(self, x):
            q, k, v = self.qkv(x).split(8, dim=-1)
            return self.head(v + 0 * (q.detach() + k.detach()))  # q and k rows blocked

    report = preflight(Fused(), F.cross_entropy, cls_batch(features=8), num_classes=3, skip=["overfit_batch"])
    flow = report["gradient_flow"]
    assert flow.status == "warn"
    assert "qkv.weight: 16/24 output rows get exactly zero gradient (rows 0..15" in flow.message


@pytest.mark.slow
def test_tied_head_with_default_embedding_init_fails_init_loss():
    torch.manual_seed(0)
    model = TiedLM()
    nn.init.normal_(model.emb.weight)  # nn.Embedding's default N(0, 1), now the head
    report = preflight(model, ce, lm_batch(), num_classes=20, sequence_dim=1, skip=["overfit_batch"])
    assert report["init_loss"].status == "fail" and report["init_loss"].value > 3 * math.log(20)


def test_init_loss_bands_against_ln_num_classes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 10))
    x, _ = cls_batch()
    y = torch.randint(0, 10, (8,), generator=torch.Generator().manual_seed(3))
    ok = preflight(model, F.cross_entropy, (x, y), num_classes=10, skip=["overfit_batch"])
    assert ok["init_loss"].status == "pass"
    assert abs(ok["init_loss"].value - math.log(10)) < 1.0
    with torch.no_grad():
        model[2].weight.mul_(60)  # a confidently wrong init
    bad = preflight(model, F.cross_entropy, (x, y), num_classes=10, skip=["overfit_batch"])
    loss = F.cross_entropy(model(x), y).item()
    assert bad["init_loss"].value == pytest.approx(loss, rel=1e-6)
    assert loss - math.log(10) > Thresholds().init_excess_fail and bad["init_loss"].status == "fail"


# ---- the API contract ------------------------------------------------------------------------------------------
def test_preflight_leaves_model_grads_mode_and_rng_untouched():
    torch.manual_seed(0)
    model = SmallCNN()
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    g = torch.Generator().manual_seed(1)
    batch = (torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 4, (8,), generator=g))
    preflight(model, F.cross_entropy, batch, num_classes=4)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # BN running stats too
    assert all(p.grad is None for p in model.parameters())
    assert not model.training
    assert torch.equal(rng, torch.get_rng_state())


def test_report_lists_checks_in_order_and_skip_removes_them():
    report = preflight(
        nn.Linear(6, 3), F.cross_entropy, cls_batch(), num_classes=3, skip=["overfit_batch", "kernel_agreement"]
    )
    assert [c.name for c in report.checks] == [c for c in CHECKS if c not in ("overfit_batch", "kernel_agreement")]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"skip": ["gradient_flw"]}, r"skip=\['gradient_flw'\]: unknown check; choose from init_loss"),
        ({"num_classes": 1}, r"num_classes=1: expected an int >= 2"),
        ({"sequence_dim": 0}, r"sequence_dim=0: expected an int >= 1"),
    ],
)
def test_bad_arguments_give_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        preflight(nn.Linear(6, 3), F.cross_entropy, cls_batch(), **kwargs)


def test_bad_batch_and_failing_model_are_named():
    with pytest.raises(ValueError, match=r"batch: expected \(inputs, targets\)"):
        preflight(nn.Linear(6, 3), F.cross_entropy, torch.zeros(8, 6))
    with pytest.raises(RuntimeError, match="preflight: model/loss_fn failed on the batch: RuntimeError: mat1"):
        preflight(nn.Linear(5, 3), F.cross_entropy, cls_batch())


# ---- more unseen healthy models, with the default optimizer ---------------------------------------------------
class LSTMLM(nn.Module):
    def __init__(self, vocab=50, dim=32):
        super().__init__()
        self.emb, self.lstm, self.head = (
            nn.Embedding(vocab, dim),
            nn.LSTM(dim, dim, batch_first=True),
            nn.Linear(dim, vocab),
        )

    def forward(self, idx):
        return self.head(self.lstm(self.emb(idx))[0])


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.head = nn.EmbeddingBag(5000, 16), nn.Linear(16, 3)

    def forward(self, idx):
        return self.head(self.bag(idx))


class BinaryConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv1d(2, 8, 5), nn.Linear(8, 1)

    def forward(self, x):
        return self.head(F.relu(self.conv(x)).amax(-1)).squeeze(-1)


@pytest.mark.slow
def test_more_unseen_models_pass_with_the_default_optimizer():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(1, 50, (6, 21), generator=g)
    tok[3:, 15:] = 0  # padding, ignored by the loss
    targets = tok[:, 1:].clone()
    targets[targets == 0] = -100
    cases = {
        "padded LSTM LM, ignore_index": dict(
            model=LSTMLM(),
            batch=(tok[:, :-1], targets),
            num_classes=50,
            sequence_dim=1,
            loss_fn=lambda o, t: F.cross_entropy(o.flatten(0, 1), t.flatten(), ignore_index=-100),
        ),
        "EmbeddingBag over 5000 rows": dict(
            model=BagOfWords(),
            loss_fn=F.cross_entropy,
            num_classes=3,
            batch=(torch.randint(0, 5000, (8, 6), generator=g), torch.randint(0, 3, (8,), generator=g)),
        ),
        "binary conv, BCE with logits": dict(
            model=BinaryConv(),
            loss_fn=F.binary_cross_entropy_with_logits,
            num_classes=2,
            batch=(torch.randn(8, 2, 30, generator=g), torch.randint(0, 2, (8,), generator=g).float()),
        ),
        "label smoothing, batch of 2": dict(
            model=nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 5)),
            num_classes=5,
            loss_fn=lambda o, t: F.cross_entropy(o, t, label_smoothing=0.1),
            batch=cls_batch(n=2, classes=5),
        ),
    }
    for name, kwargs in cases.items():
        report = preflight(**kwargs)
        assert not_passing(report) == {}, f"{name}:\n{report}"


@pytest.mark.slow
def test_position_table_is_not_mistaken_for_examples_when_batch_equals_length():
    torch.manual_seed(0)
    report = preflight(TiedLM(), ce, lm_batch(n=12, T=12), num_classes=20, sequence_dim=1, skip=["overfit_batch"])
    for name in ("batch_independence", "causality"):
        assert report[name].status == "pass", str(report)
    assert "pos" not in report["batch_independence"].message  # probed at emb only (indexed by the input)
