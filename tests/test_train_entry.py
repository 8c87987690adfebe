"""The built-in trainer as a task: `python -m sweeper.train` exit codes, the plan-time validate hook, the run's
identity.

    python -m pytest -q tests/test_train_entry.py

`sweeper.train:main` is a plain client of the run API, so the run's experiment and variant come from its status (what
the plan writes), not from its config; `sweeper.train.checks.validate` is what the sweeper parent calls on every
planned run, torch-free, reading each distinct corpus once.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

import sweeper.train as train
from sweeper.run import ConfigError as RunConfigError
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status
from sweeper.train.checks import validate
from sweeper.train.config import ConfigError, RunConfig
from tests.helpers.commands import ROOT
from tests.helpers.train_runs import log_text, make_run_dir, small_corpus, tiny_config
from tests.helpers.train_runs import train as train_process

SHORT = {"train.steps": 6, "train.ckpt_interval": 3, "train.eval_interval": 3, "train.log_interval": 3}
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.slow
def test_python_m_train_exit_codes_and_one_line_errors(tmp_path):
    usage = subprocess.run(
        [sys.executable, "-m", "sweeper.train"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert usage.returncode == 2 and usage.stderr.startswith("usage: python -m sweeper.train RUN_DIR")
    bad = make_run_dir(tmp_path / "bad", tiny_config(0, **{"train.stepz": 3}))
    assert train_process(bad) == 2
    errors = [line for line in log_text(bad).splitlines() if "error:" in line]
    assert errors == [
        "sweeper.run: error: unknown config key train.stepz: accepted keys of train are batch_size, "
        "ckpt_interval, deterministic, device, eval_batches, eval_interval, grad_clip, "
        "keep_checkpoints, log_interval, lr, steps, warmup_steps, weight_decay"
    ]
    status = RunDir(bad).read_status()
    assert (status.status, status.exit_code) == (Status.FAILED, 2) and "train.stepz" in status.error
    good = make_run_dir(tmp_path / "good", tiny_config(0, **SHORT))
    assert train_process(good) == 0, log_text(good)
    assert train_process(good) == 0 and "already finished; nothing to do" in log_text(good)


def test_in_process_run_takes_its_identity_from_the_run_not_the_config(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.update_status(Status.PENDING, run_id="rope-nope-s3", experiment="rope", variant="nope", seed=3)
    cfg = tiny_config(3, **SHORT)
    cfg.update(experiment="old", variant="ignored")  # written by older sweeps: accepted, ignored
    summary = train.run(cfg, rd.path)
    assert (summary["status"], summary["steps"]) == ("finished", 6)
    assert (summary["experiment"], summary["variant"], summary["seed"], summary["run_id"]) == (
        "rope",
        "nope",
        3,
        "rope-nope-s3",
    )
    assert summary["determinism"]["deterministic_algorithms"] is True and "resumed_from" not in summary
    assert {"corpus_hash", "data_order_hash", "num_threads", "config_hash"} <= set(summary["fingerprint"])
    assert [r["step"] for r in rd.read_metrics()[0]] == [3, 6]
    used = summary["used"]                          # what it used: the compute ledger, its data's sizes, its config
    batch, context = cfg["train"]["batch_size"], cfg["model"]["context"]
    assert (used["steps"], used["examples"], used["tokens"]) == (6, 6 * batch, 6 * batch * context)
    assert used["eval_size"] > 0 and used["train_size"] > 0 and used["config_read"] == ["*"]
    assert train.run(cfg, rd.path) == summary, "a finished run is not trained again"


def test_validate_hook_one_line_errors_and_a_corpus_read_once_per_change(tmp_path):
    with pytest.raises(ConfigError, match=r"^unknown run config key\(s\) optim: the built-in trainer"):
        validate({**tiny_config(0), "optim": {}})
    assert issubclass(ConfigError, RunConfigError), "the entry runner maps it to exit status 2"
    corpus = small_corpus(tmp_path / "corpus.txt")
    config = tiny_config(0, **{"data.kind": "text", "data.path": str(corpus)})
    validate(config)
    validate({**config, "seed": 5})  # same data: not read again
    corpus.write_text("too short\n")
    with pytest.raises(ConfigError, match=r"data.path=.*corpus.txt: only 10 characters; need at least 1000"):
        validate(config)  # the file changed: read again, refused
    corpus.unlink()
    with pytest.raises(ConfigError, match=r"no such file"):
        validate(config)
    assert "experiment" not in RunConfig.from_dict({**config, "experiment": "x"}).to_dict()


def test_validate_is_torch_free():
    code = (
        "import sys; from sweeper.train.checks import validate; validate({'seed': 0, 'data': {'n_files': 2}}); "
        "print('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr
