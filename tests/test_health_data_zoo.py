"""Issue 29, the data half of the checklist: the data/evaluation bug zoo (tests/helpers/health_data_zoo.py). Every bug
is
flagged by the check that names its cause, every healthy twin is clean, and every bug is shown to be real by a
measurement (not only asserted); inputs far from standardized are named as the cause of the checks they break;
run.health(val_data=, evaluate=) checks the evaluation in a real run.

    python -m pytest -q tests/test_health_data_zoo.py -m "not slow"      # the fast tier (seed 0)
    python -m pytest -q tests/test_health_data_zoo.py                    # + seeds 1-2 and the training proofs
"""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import sweeper
from sweeper.health import preflight
from tests.helpers.health_data_models import CNN, MLP, clusters, images, loader, make_evaluate, sizes, standardize
from tests.helpers.health_data_zoo import CASES, unclean

pytestmark = pytest.mark.usefixtures("one_thread", "quiet")


def _flagged(name: str, seed: int) -> None:
    case = CASES[name]
    report = preflight(**case.build(True, seed))
    check = report[case.caught_by]
    assert check.status in case.status and case.says in check.message, str(report)
    assert not report.errors, str(report)


def _clean(name: str, seed: int) -> None:
    report = preflight(**CASES[name].build(False, seed))
    assert unclean(report) == {}, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_bug_flagged_by_the_check_that_names_its_cause(name):
    _flagged(name, 0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_healthy_twin_is_clean(name):
    _clean(name, 0)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c.slow_proof])
def test_bug_is_real(name):
    CASES[name].prove(0)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.slow_proof])
def test_bug_is_real_by_training(name):
    CASES[name].prove(0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_other_seeds_and_sizes(name, seed):
    """Other class counts, feature counts and batch sizes: the same verdicts, and the bug still real."""
    _flagged(name, seed)
    _clean(name, seed)
    CASES[name].prove(seed)


# ---- item 3: the inputs named as the cause of the checks they break -----------------------------------------------
@pytest.mark.slow
def test_raw_pixels_blame_the_inputs_not_the_last_layer_or_the_learning_rate():
    report = preflight(**CASES["raw_pixels"].build(True, 0))
    inputs = report["inputs"]
    assert inputs.status == "fail" and "raw 0-255 pixels" in inputs.message
    consequences = inputs.details["consequences"]
    assert "init_loss" in consequences and "update_ratio" in consequences, str(report)
    for name in consequences:
        check = report[name]
        assert check.status == "fail", str(report)
        assert check.message.startswith("caused by the inputs") and "standardize them first" in check.message
        assert "output layer initialised too large" not in check.message
        assert "learning rate" not in check.message
        assert check.details["with_standardized_inputs"] is not None
    assert "output layer initialised too large" in report["init_loss"].details["message_as_given"]
    # the counterfactual is measured: the same checks on the standardized twin pass
    twin = preflight(**CASES["raw_pixels"].build(False, 0))
    assert all(twin[name].status == "pass" for name in consequences), str(twin)


@pytest.mark.slow
def test_a_check_that_fails_for_its_own_reason_keeps_its_diagnosis():
    """Raw pixels AND a learning rate of 50: with standardized inputs update_ratio still fails, so it keeps its
    own cause and only notes the inputs."""
    kw = CASES["raw_pixels"].build(True, 0)
    kw["optimizer_factory"] = lambda p: torch.optim.SGD(p, lr=50.0)
    report = preflight(**kw)
    ratio = report["update_ratio"]
    assert ratio.status == "fail" and "learning rate" in ratio.message
    assert "the inputs are not standardized either" in ratio.message
    assert "update_ratio" not in report["inputs"].details.get("consequences", [])


# ---- item 1: labels of the wrong dtype explained when the loss refuses them ---------------------------------------
def test_float_class_labels_for_cross_entropy_are_explained():
    c, d = sizes(0)
    x, y = clusters(64, c, d, 0)
    with pytest.raises(RuntimeError):                      # the bug is real: cross_entropy refuses them
        F.cross_entropy(torch.randn(64, c), y.float())
    with pytest.raises(RuntimeError, match=r"pass y\.long\(\)") as err:
        preflight(MLP(d, c), F.cross_entropy, (x, y.float()), num_classes=c)
    assert "model/loss_fn failed on the batch" in str(err.value) and "holding class indices" in str(err.value)


def test_out_of_range_labels_are_explained_when_the_loss_refuses_them():
    c, d = sizes(0)
    x, y = clusters(64, c, d, 0)
    with pytest.raises(RuntimeError, match=r"labels are 1-based - subtract 1"):
        preflight(MLP(d, c), F.cross_entropy, (x, y + 1), num_classes=c)


# ---- item 2: validation as evidence in a real run ----------------------------------------------------------------
def _run_cnn(tmp_path, name: str, *, evaluation: str, train_calls_train: bool, steps: int = 30):
    """A small CNN training loop with the run API: health with val_data and evaluate, an evaluation every 10
    steps. evaluation: "proper" (model.eval(), then model.train()), "eval_only" (model.eval(), never undone),
    "no_eval" (model.eval() forgotten); train_calls_train=False: the loop never calls model.train() itself."""
    c, _ = sizes(0)
    x, y = images(512, c, 0)
    xv, yv = images(128, c, 100)
    x, xv = standardize(x), standardize(xv, x)
    run = sweeper.init(tmp_path / name, {"seed": 0})
    torch.manual_seed(0)
    model = CNN(c)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def evaluate(m):
        m.eval()
        with torch.no_grad():
            loss = F.cross_entropy(m(xv), yv).item()
        if evaluation == "proper":
            m.train()
        return loss
    if evaluation == "no_eval":
        evaluate = make_evaluate(xv, yv, use_eval=False)
    health = run.health(model, num_classes=c, interval=5, val_data=(xv, yv), evaluate=evaluate)
    model.train()
    batches = list(loader(x, y, 64, True, 0))
    for step in range(steps):
        if train_calls_train:
            model.train()
        xb, yb = batches[step % len(batches)]
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        health.after_backward(step, loss)
        opt.step()
        health.after_step(step)
        if (step + 1) % 10 == 0:
            run.log(step + 1, train_loss=loss.item(), val_loss=evaluate(model))
    run.finish(val_loss=evaluate(model))
    return model, json.loads((tmp_path / name / "health.json").read_text())


def _check(health_json, name):
    return next(c for c in health_json["checks"] if c["name"] == name)


@pytest.mark.slow
def test_run_health_checks_the_evaluation_and_the_trained_batchnorm(tmp_path):
    model, health = _run_cnn(tmp_path, "ok", evaluation="proper", train_calls_train=True)
    assert _check(health, "eval_determinism")["status"] == "pass"
    assert _check(health, "train_mode")["status"] == "pass"
    assert _check(health, "batchnorm_stats")["status"] == "pass", _check(health, "batchnorm_stats")
    assert int(model.bn1.num_batches_tracked) == 30


@pytest.mark.slow
def test_run_that_trains_in_eval_mode_is_named(tmp_path):
    """evaluate() calls model.eval() and nothing calls model.train() again: from step 10 on, dropout is off and
    BatchNorm stops tracking. Real: the running statistics stopped at 10 updates."""
    model, health = _run_cnn(tmp_path, "eval_left_on", evaluation="eval_only", train_calls_train=False)
    assert int(model.bn1.num_batches_tracked) == 10                     # the bug is real: tracking stopped
    mode = _check(health, "train_mode")
    assert mode["status"] == "warn" and "model.train()" in mode["message"] and mode["value"] == 20
    assert health["verdict"] in ("warn", "fail")


def test_run_whose_evaluate_leaves_batchnorm_in_train_mode_fails_eval_determinism(tmp_path):
    _, health = _run_cnn(tmp_path, "no_eval", evaluation="no_eval", train_calls_train=True, steps=10)
    check = _check(health, "eval_determinism")
    assert check["status"] == "fail" and "model.eval() is missing" in check["message"]
    assert health["verdict"] == "fail"


def test_batchnorm_never_updated_in_training_fails_at_the_end(tmp_path):
    """The whole run in eval mode: the running statistics never moved from their initial values."""
    c, _ = sizes(0)
    x, y = images(256, c, 0)
    x = 3 * x
    run = sweeper.init(tmp_path / "frozen", {"seed": 0})
    torch.manual_seed(0)
    model = CNN(c)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    health = run.health(model, num_classes=c, val_data=(x[:64], y[:64]))
    model.eval()                                                       # the bug
    for step in range(20):
        loss = F.cross_entropy(model(x[:64]), y[:64])
        opt.zero_grad()
        loss.backward()
        health.after_backward(step, loss)
        opt.step()
    run.finish(val_loss=1.0)
    assert int(model.bn1.num_batches_tracked) == 0 and float(model.bn1.running_mean.abs().max()) == 0.0
    report = json.loads((tmp_path / "frozen" / "health.json").read_text())
    bn = _check(report, "batchnorm_stats")
    assert bn["status"] == "fail" and "never updated their running statistics" in bn["message"]
    assert _check(report, "train_mode")["status"] == "warn"


def test_monitor_checks_point_at_unstandardized_inputs(tmp_path):
    """A run whose preflight named the inputs: a monitor warning is marked as their likely consequence."""
    from sweeper.health.checks.attribution import annotate_consequences
    from sweeper.health.result import CheckResult

    pre = preflight(**CASES["raw_pixels"].build(True, 0))
    live = CheckResult("grad_spike", "warn", 40.0, "< 10x running median", "grad norm 40x its running median")
    report = annotate_consequences(pre.merged([live]))
    assert report["grad_spike"].message.startswith("likely a consequence of the inputs (inputs not standardized")
    assert live.message == "grad norm 40x its running median"           # the monitor's own record is untouched


# ---- docs/health-checks.md, its data-checks table: every documented way to silence a check silences it ----
def _readme_silencers() -> dict[str, dict[str, str]]:
    """check -> {threshold: value} from the data-checks table of docs/health-checks.md (`name=value`, last column)."""
    import re

    from tests.helpers.commands import ROOT

    out = {}
    for line in (ROOT / "docs" / "health-checks.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 6 and cells[2].startswith("`") and re.search(r"`\w+=", cells[4]):
            check = cells[2].split("`")[1]
            out.setdefault(check, {}).update(pair.split("=", 1) for pair in re.findall(r"`(\w+=[^`]+)`", cells[4]))
    return out


ALWAYS_A_BUG = ("one_based_labels", "lm_padding_mask_inverted")     # fails docs/health-checks.md says nothing silences


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CASES if n not in ALWAYS_A_BUG])
def test_the_documented_threshold_silences_the_check(name):
    from sweeper.health import Thresholds

    case = CASES[name]
    silencers = _readme_silencers()
    assert case.caught_by in silencers, f"docs/health-checks.md has no silencer for {case.caught_by}"
    values = {k: (v if v in ("pass", "warn", "fail") else float(v)) for k, v in silencers[case.caught_by].items()}
    kwargs = case.build(True, 0)
    kwargs["thresholds"] = Thresholds.from_dict(values)
    check = preflight(**kwargs)[case.caught_by]
    assert check.status not in ("warn", "fail"), (values, check.message)


def test_run_health_with_a_shuffling_val_loader_leaves_the_runs_rng_alone(tmp_path):
    """The run's random streams must not move because health read the validation data (bitwise resumes)."""
    c, d = sizes(0)
    xv, yv = clusters(256, c, d, 1)
    model = MLP(d, c, dropout=0.2)
    run = sweeper.init(tmp_path / "rng", {"seed": 0})
    torch.manual_seed(123)
    before = torch.get_rng_state()
    unseeded = DataLoader(TensorDataset(xv, yv), batch_size=32, shuffle=True)        # draws from the global RNG
    health = run.health(model, num_classes=c, val_data=unseeded,
                        evaluate=make_evaluate(xv, yv, use_eval=True))
    assert torch.equal(torch.get_rng_state(), before)
    assert _check(json.loads((tmp_path / "rng" / "health.json").read_text()), "eval_determinism")["status"] == "pass"
    health.finish()
    assert torch.equal(torch.get_rng_state(), before)
    run.close()
