"""Metrics from documented sources only (issue 46): what a Hugging Face Trainer leaves in {out_dir} (a model's
config.json, checkpoint-N/trainer_state.json, trainer_state.json, all_results.json) gives the run its metrics
from the Trainer's own records; the model's config keys are never metrics, a metric typo lists only metrics and
says `experiment.metric=`, and each final names its file.

    python -m pytest -q -n 0 tests/test_trainer_files.py
"""
from __future__ import annotations

import json

import pytest

from sweeper.run.observed.reported import read_reported
from tests.helpers.glue import glue_project, sweep

HISTORY = [{"loss": 2.0, "step": 1}, {"eval_loss": 1.9, "step": 2}, {"loss": 1.6, "step": 3},
           {"eval_loss": 1.5, "step": 4}]
TRAINER = f"""
def dump(path, obj):
    os.makedirs(os.path.dirname(os.path.join(args.out, path)), exist_ok=True)
    with open(os.path.join(args.out, path), 'w') as f:
        json.dump(obj, f)
dump('config.json', {{'hidden_size': 64, 'vocab_size': 100, 'architectures': ['GPT2LMHeadModel']}})
dump('checkpoint-2/trainer_state.json', {{'global_step': 2, 'log_history': {HISTORY[:2]!r}}})
dump('tokenizer.json', {{'model': {{'vocab': {{'a': 0}}}}}})
dump('trainer_state.json', {{'global_step': 4, 'train_batch_size': 8, 'log_history': {HISTORY!r}}})
dump('all_results.json', {{'eval_loss': 1.5 + 0.01 * args.seed, 'train_runtime': 3.2}})
"""


def test_a_trainers_out_folder_gives_its_records_not_its_config(tmp_path):
    out = tmp_path / "out"
    for path, obj in (("config.json", {"hidden_size": 64}), ("checkpoint-2/trainer_state.json",
                                                              {"log_history": HISTORY[:2]}),
                      ("trainer_state.json", {"train_batch_size": 8, "log_history": HISTORY}),
                      ("predictions.csv", None)):
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(json.dumps(obj) if obj else "id,score\n1,0.5\n")
    got = read_reported("", ["stdout"], None, base=out, out_dir=out)
    assert got.final == {"loss": 1.6, "eval_loss": 1.5}                  # no hidden_size, no train_batch_size
    assert got.steps == HISTORY                                           # once each: the newest state only
    assert got.sources["eval_loss"] == ("out/trainer_state.json, log_history[3], key eval_loss (step 4): the last of "
                                        "2 values")
    assert any("config.json" in n and "predictions.csv" in n and "task.metrics" in n for n in got.notes), got.notes
    named = read_reported("", ["predictions.csv"], None, base=out, out_dir=out)   # named: read
    assert named.final == {"id": 1, "score": 0.5}


@pytest.mark.slow
def test_a_metric_typo_on_a_trainer_run_lists_only_metrics_and_the_fix_runs(tmp_path):
    project = glue_project(tmp_path, TRAINER)
    typo = sweep(project, "seeds=0")                                       # experiment.metric: val_loss
    assert typo.returncode == 2
    line, = [ln for ln in typo.stderr.splitlines() if "without the decision metric" in ln]
    assert "Fix: set experiment.metric to the name the run reports (" in line
    assert "eval_loss" in line and "hidden_size" not in line and "vocab_size" not in line, line
    fixed = sweep(project, "seeds=0", "experiment.metric=eval_loss")
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]
    summary = json.loads((project / "sweep" / "runs" / "a" / "seed_0" / "summary.json").read_text())
    assert summary["final"]["eval_loss"] == 1.5 and "hidden_size" not in summary["final"]
    assert summary["metric_sources"]["eval_loss"].startswith("out/all_results.json, key eval_loss")
