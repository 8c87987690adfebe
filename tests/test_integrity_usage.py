"""What a run used (sweeper.run.usage, the summary's `used` block) and the checks that read it: key_never_read,
generator_unused, train_subset, budget_confound's compute ledger and evaluation_identity's evaluation size, with
their coverage lines; each bug beside its healthy twin. The same through the real CLI:
tests/test_integrity_usage_cli.py.

    python -m pytest -q -n 0 tests/test_integrity_usage.py
"""
from __future__ import annotations

import copy
import json

import pandas as pd
import pytest
from omegaconf import OmegaConf

import sweeper
from sweeper.analysis.integrity import COVERAGE, Effect, SweepEvidence
from sweeper.analysis.integrity.records.budget import budget_confound
from sweeper.analysis.integrity.records.evaluation import evaluation_identity
from sweeper.analysis.integrity.records.subset import limiting, train_subset
from sweeper.analysis.integrity.records.usage import generator_unused, key_never_read, passed_as_arguments
from sweeper.analysis.results import used_columns
from sweeper.config.variants.config_diff import Change
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.usage import Usage, was_read

EXP = Experiment(name="e", baseline="base", metric="val_loss", lower_is_better=True,
                 variants={"base": [], "big": ["x=1"]})


def evidence(tmp_path, per_arm: dict, changes=None, task=None, seeds=(0, 1, 2)) -> SweepEvidence:
    """Finished runs; per_arm {variant: Usage or a function of the seed -> Usage}, as load_runs makes the columns."""
    rows = []
    for variant, used in per_arm.items():
        for seed in seeds:
            u = used(seed) if callable(used) else used
            rows.append({"variant": variant, "seed": seed, "run_id": f"{variant}/{seed}", "status": "finished",
                         "run_dir": f"runs/{variant}/seed_{seed}", "steps": 40, "final_val_loss": 1.0 + 0.1 * seed,
                         **used_columns(u)})
    curves = pd.DataFrame(columns=["run_id", "variant", "seed", "step", "metric", "value"])
    return SweepEvidence(tmp_path, EXP, pd.DataFrame(rows), curves, changes or {}, task=task or {})


def test_the_run_api_records_keys_read_generators_drawn_and_what_was_consumed(tmp_path):
    run = sweeper.init(tmp_path / "r", {"seed": 1, "lr": 0.1, "model": {"width": 3, "depth": 2},
                                        "opt": {"wd": 0.0}, "typo": 5})
    cfg = run.config
    assert (cfg.lr, cfg.model.width, OmegaConf.select(cfg, "opt.wd")) == (0.1, 3, 0.0)
    copy.deepcopy(cfg.opt)                                     # a copy reads the mapping whole
    used_rng, idle_rng = run.numpy_rng("data_order"), run.numpy_rng("eval_batches")
    used_rng.normal()
    run.consumed(examples=64, steps=1)
    run.consumed(examples=64, steps=1)
    summary = run.finish(val_loss=1.0, tokens_seen=1000, eval_size=50)
    used = json.loads((tmp_path / "r" / "summary.json").read_text())["used"]
    assert summary["final"] == {"val_loss": 1.0}               # the documented keys are no metrics
    assert used["generators"] == {"data_order": True, "eval_batches": False}
    assert (used["examples"], used["steps"], used["tokens"], used["eval_size"]) == (128, 2, 1000, 50)
    assert {"lr", "model.width", "opt.wd", "opt.*"} <= set(used["config_read"]) and "typo" not in used["config_read"]
    assert not was_read("typo", used["config_read"]) and not was_read("model.depth", used["config_read"])
    assert summary["fingerprint"]["seed_streams"] == "data_order"    # the idle generator pairs nothing
    assert idle_rng is not None


def test_config_dict_and_to_container_count_as_reads(tmp_path):
    run = sweeper.init(tmp_path / "r", {"seed": 0, "a": {"b": 1}, "c": 2})
    OmegaConf.to_container(run.config.a)
    assert was_read("a.b", run._reads.keys) and not was_read("c", run._reads.keys)
    run.config_dict
    assert was_read("c", run._reads.keys)


def test_was_read_covers_keys_below_and_mappings_read_whole():
    assert was_read("model", ["model.width"]) and was_read("model.width", ["model.*"])
    assert was_read("anything", ["*"]) and not was_read("model.width", ["model"])
    assert not was_read("lr", ["lr_decay"])


def test_a_bad_used_block_names_the_file(tmp_path):
    with pytest.raises(UnreadableFile, match="used.examples"):
        Usage.from_dict({"examples": -3}, tmp_path / "summary.json")
    assert Usage.from_dict({"examples": 3, "other": 1}, tmp_path).examples == 3


def test_a_bad_reported_count_is_warned_and_the_run_keeps_its_result(tmp_path, capsys):
    run = sweeper.init(tmp_path / "r", {"seed": 0})
    summary = run.finish(val_loss=1.0, examples_seen="many")
    assert summary["final"] == {"val_loss": 1.0} and "examples" not in summary.get("used", {})
    assert "examples_seen='many'" in capsys.readouterr().err


def test_key_never_read_names_the_unread_key_on_either_side(tmp_path):
    reads = Usage(config_read=["lr", "steps"])
    ev = evidence(tmp_path, {"base": reads, "big": reads}, {"big": [Change("dropout", 0.0, 0.5)]})
    [f] = key_never_read(ev)
    assert f.effect is Effect.INVALID and "dropout" in f.evidence
    partial = evidence(tmp_path, {"base": reads, "big": reads},
                       {"big": [Change("dropout", 0.0, 0.5), Change("lr", 0.1, 0.2)]})
    [f] = key_never_read(partial)
    assert f.effect is Effect.WARN and "dropout" in f.evidence and "lr:" not in f.evidence
    read_by_base = evidence(tmp_path, {"base": Usage(config_read=["lr", "dropout"]), "big": reads},
                            {"big": [Change("dropout", 0.0, 0.5)]})
    assert key_never_read(read_by_base) == []


def test_key_never_read_is_quiet_without_reads_or_for_keys_passed_as_arguments(tmp_path):
    changes = {"big": [Change("dropout", 0.0, 0.5)]}
    assert key_never_read(evidence(tmp_path, {"base": Usage(), "big": Usage()}, changes)) == []
    reads = Usage(config_read=["lr"])
    for task in ({"command": ["python", "t.py", "--dropout={dropout}"]}, {"command": ["python"], "args": "flags"},
                 {"command": ["python"], "args": ["dropout"]}):
        assert passed_as_arguments(task, "dropout")
        assert key_never_read(evidence(tmp_path, {"base": reads, "big": reads}, changes, task)) == []
    cover = COVERAGE["key_never_read"](evidence(tmp_path, {"base": Usage(), "big": Usage()}, changes))
    assert not cover.checked and "not checked" in cover.evidence


def test_generator_unused_warns_and_its_twin_is_quiet(tmp_path):
    idle = Usage(generators={"data_order": False})
    [f] = generator_unused(evidence(tmp_path, {"base": idle, "big": idle}))
    assert f.effect is Effect.WARN and "data_order" in f.evidence and f.variants == ("base", "big")
    drawn = Usage(generators={"data_order": True})
    assert generator_unused(evidence(tmp_path, {"base": drawn, "big": drawn})) == []
    assert not COVERAGE["generator_unused"](evidence(tmp_path, {"base": Usage(), "big": Usage()})).checked


def test_budget_confound_reads_the_ledger_whatever_key_moved_it(tmp_path):
    base, more = Usage(examples=160, steps=40), Usage(examples=480, steps=40)
    [f] = budget_confound(evidence(tmp_path, {"base": base, "big": more}, {"big": [Change("batch", 4, 12)]}))
    assert f.effect is Effect.NOT_COMPARABLE and "480 examples" in f.evidence and "160" in f.evidence
    within = Usage(examples=140, steps=35)                       # early stopping within the tolerance
    assert budget_confound(evidence(tmp_path, {"base": base, "big": within})) == []
    # the same examples in 4x fewer optimizer steps (gradient accumulation): the change itself, not more budget;
    # steps decide only where no run counted its data
    assert budget_confound(evidence(tmp_path, {"base": base, "big": Usage(examples=160, steps=10)})) == []
    [f] = budget_confound(evidence(tmp_path, {"base": Usage(steps=40), "big": Usage(steps=10)}))
    assert "10 optimizer steps" in f.evidence
    # a budget-named key that the ledger shows moved nothing: the hint gives way to the evidence
    assert budget_confound(evidence(tmp_path, {"base": base, "big": base}, {"big": [Change("max_steps", 9, 40)]})) == []
    assert budget_confound(evidence(tmp_path, {"base": Usage(), "big": Usage()},
                                    {"big": [Change("max_steps", 9, 40)]}))       # no ledger: the key rule stands
    assert COVERAGE["budget_confound"](evidence(tmp_path, {"base": base, "big": base})).checked


def test_evaluation_identity_reads_the_evaluation_size(tmp_path):
    [f] = evaluation_identity(evidence(tmp_path, {"base": Usage(eval_size=64), "big": Usage(eval_size=24)},
                                       {"big": [Change("points", 64, 24)]}))
    assert f.effect is Effect.NOT_COMPARABLE and "24 examples" in f.evidence
    same = Usage(eval_size=64)
    assert evaluation_identity(evidence(tmp_path, {"base": same, "big": same})) == []
    cover = COVERAGE["evaluation_identity"](evidence(tmp_path, {"base": Usage(), "big": Usage()}))
    assert not cover.checked and "recorded no fingerprint and no size" in cover.evidence


def test_evaluation_identity_reads_a_reported_evaluation_size_where_none_was_recorded(tmp_path):
    """A plain script printing eval_examples (not the documented eval_size): its size counts; a running count
    (eval_examples_seen, early stopping moves it) does not."""
    def with_final(column, base, big):
        ev = evidence(tmp_path, {"base": Usage(), "big": Usage()})
        ev.runs[column] = [base if v == "base" else big for v in ev.runs["variant"]]
        return ev
    [f] = evaluation_identity(with_final("final_eval_examples", 100, 250))
    assert f.effect is Effect.NOT_COMPARABLE and "250 examples vs base's 100" in f.evidence
    assert COVERAGE["evaluation_identity"](with_final("final_n_val", 100, 100)).checked
    assert evaluation_identity(with_final("final_n_val", 100, 100)) == []
    assert evaluation_identity(with_final("final_eval_examples_seen", 1000, 2500)) == []
    assert evaluation_identity(with_final("final_val_batches", 5, 2)) == []


def test_train_subset_from_config_keys_and_command_flags(tmp_path):
    for run_dir, limit in (("runs/base/seed_0", 40), ("runs/big/seed_0", 40)):
        (tmp_path / run_dir).mkdir(parents=True)
        (tmp_path / run_dir / "config.yaml").write_text(f"seed: 0\ndata: {{limit: {limit}, n_train: 9000}}\n")
    small = Usage(train_size=40, eval_size=64)          # fewer training than evaluation examples: no evidence alone
    [f] = train_subset(evidence(tmp_path, {"base": small, "big": small}, seeds=(0,)))
    assert f.effect is Effect.WARN and "data.limit=40 in every arm" in f.evidence and "n_train" not in f.evidence
    assert COVERAGE["train_subset"](evidence(tmp_path, {"base": small, "big": small}, seeds=(0,))).checked
    healthy = evidence(tmp_path / "none", {"base": small, "big": small})
    assert train_subset(healthy) == [] and not COVERAGE["train_subset"](healthy).checked
    [f] = train_subset(evidence(tmp_path / "none", {"base": small, "big": small},
                                task={"command": ["python", "t.py", "--max_train_samples", "512"]}))
    assert "--max_train_samples 512" in f.evidence
    # a count limit weighed against the ledger: below what a run consumed it cut the data; at or above, nothing
    for run_dir in ("runs/base/seed_0", "runs/big/seed_0"):
        (tmp_path / run_dir / "config.yaml").write_text("seed: 0\nlimit: 2000\n")
    drew = Usage(examples=1280)
    assert train_subset(evidence(tmp_path, {"base": drew, "big": drew}, seeds=(0,))) == []
    [f] = train_subset(evidence(tmp_path, {"base": drew, "big": Usage(examples=2560)}, seeds=(0,)))
    assert "limit=2000 in big" in f.evidence and f.variants == ("big",)
    assert limiting("data.limit", 200) and limiting("debug", True) and limiting("train_fraction", 0.05)
    # the class, not one spelling: a row limit, a sampled share of the data, a smoke-test switch (even on the command)
    assert limiting("nrows", 150) and limiting("data.sample_frac", 0.1) and limiting("smoke-test", True)
    assert limiting("data.subsample_ratio", 0.25) and limiting("max_rows", 500) and limiting("train_pct", 10)
    assert not any(limiting(k, v) for k, v in (("nrows", None), ("data.sample_frac", 1.0), ("dropout_frac", 0.1),
                                               ("mask_ratio", 0.5), ("val_frac", 0.2), ("eval.smoke_test", True)))
    [f] = train_subset(evidence(tmp_path / "none", {"base": small, "big": small},
                                task={"command": ["python", "t.py", "--smoke-test"]}))
    assert "task.command passes --smoke-test" in f.evidence
    assert not any(limiting(k, v) for k, v in (("data.limit", None), ("debug", False), ("eval.limit", 200),
                                               ("train_fraction", 1.0), ("limit", -1), ("val_subset", 100),
                                               ("limit_train_batches", 1.0), ("dataset.n_train", 20000)))


def test_the_ledger_survives_a_resume_and_bad_counts_name_the_key(tmp_path):
    run = sweeper.init(tmp_path / "r", {"seed": 0})
    run.consumed(examples=32, steps=1)
    run.save_checkpoint({"w": 1}, 1)
    run.interrupt(1)
    again = sweeper.init(tmp_path / "r")
    assert again.load_checkpoint() == {"w": 1}
    again.consumed(examples=32, steps=1)
    assert again.finish(val_loss=1.0)["used"] == {"config_read": [], "examples": 64, "steps": 2}
    with pytest.raises(ValueError, match="examples=-1: examples is a count"):
        again.consumed(examples=-1)
