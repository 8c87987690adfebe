"""Order of work (issue 32.1, 32.8): bad input is answered before any process starts, and nothing is written.

Every check that needs no process and none of the user's code (keys, types, ranges, seeds, names, paths, files,
the plan against its sweep dir) runs first; then the task's validate hook (imported in this process); only then
the processes: the task's import probe (which also checks the signatures of task.entry and its hooks) and the
backend's probes. Process starts are counted with audit hooks (tests.helpers.no_process), in this process.
"""
from __future__ import annotations

import sys
import textwrap

import pytest

from sweeper.cli.sweep import main as sweep_main
from tests.helpers.commands import TINY
from tests.helpers.no_process import run_in_process

LONG = "x" * 300


def project(tmp_path, module: str = "", validate: str = "") -> None:
    """A user project in tmp_path: conf/experiment/mine.yaml running mymod:main (and mymod:validate)."""
    sys.modules.pop("mymod", None)              # the hook is imported in this process: each test its own
    (tmp_path / "mymod.py").write_text(textwrap.dedent(module or """
        def main(run):
            run.finish(val_loss=1.0)
        def validate(config):
            if config.get("width", 1) < 0:
                raise ValueError(f"width={config['width']}: must be >= 0")
    """))
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "mine.yaml").write_text(textwrap.dedent(f"""\
        # @package _global_
        defaults:
          - override /task: custom
        task:
          command: null
          entry: mymod:main
          validate: {validate or 'mymod:validate'}
        width: 1
        experiment:
          name: mine
          baseline: a
          metric: val_loss
          lower_is_better: true
          variants: {{a: [], b: [width=2]}}
    """))


BAD = [
    ["seeds=3-1"], ["seeds=[0,0]"], ["seeds=-1"], ["seeds=abc"], [f"seeds={2 ** 64}"], ["seeds=0-1000000"],
    ["train.stepz=3"], ["train.steps=abc"], ["train.steps=0"], ["train.lr=inf"], ["train.lr=nan"],
    ["train.grad_clip=-inf"], ["model.rope_base=nan"], ["+health.thresholds.ema_beta=inf"],
    ["+health.thresholds.init_deficit_fail=inf"], ["launcher.grace_s=inf"], ["launcher.retry_backoff_s=nan"],
    ["launcher.max_parallel=0"], ["sweeper.report=maybe"], ["sweeper.preflight=sometimes"],
    [f"experiment.name={LONG}"], ["experiment.name=a/b"], ["experiment.name=.."], [f"+experiment.variants.{LONG}=[]"],
    [f"sweeper.dir=sweeps/{LONG}"], [f"sweeper.dir={'d' * 250}/" * 20], ["data=text", "data.path=/no/such/corpus.txt"],
    ["data.val_fraction=0.9"], ["model.n_heads=3"], ["train.steps=="], ["nosuchkey=1"], ["--bogus"],
    ["launcher.devices=0,1", "launcher.cpu_only=true", "launcher=nosuch"], ["experiment.baseline=nosuch"],
    ["~experiment.variants.rope"], ["sweeper.adaptive.start=1", "seeds=adaptive"],
    ["experiment.min_effect=inf", "seeds=adaptive"], ["sweeper.max_runs=2"],
]


@pytest.mark.slow
@pytest.mark.parametrize("args", BAD, ids=[" ".join(a)[:40] for a in BAD])
def test_bad_input_starts_no_process_and_writes_nothing(tmp_path, args):
    result = run_in_process(sweep_main, ["+experiment=rope", *TINY, *args], cwd=tmp_path)
    assert result.code == 2, (result.code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert result.started == [], result.started
    assert result.written == [], result.written


def test_a_long_experiment_name_is_one_line_naming_the_limit(tmp_path):
    result = run_in_process(sweep_main, ["+experiment=rope", f"experiment.name={LONG}"], cwd=tmp_path)
    assert result.code == 2 and "at most 235 characters" in result.stderr and "300 characters" in result.stderr
    assert not (tmp_path / "sweeps").exists()


def test_an_existing_sweep_dir_asking_for_more_seeds_is_refused_before_any_process(tmp_path):
    """The plan is checked against its sweep dir (a different plan, seeds that need sweeper.extend=true) first."""
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan, write_plan

    args = ["+experiment=rope", *TINY, f"sweeper.dir={tmp_path / 's'}"]
    write_plan(make_plan(compose_sweep([*args, "seeds=0"], start_checks=False), [0]), [])
    result = run_in_process(sweep_main, [*args, "seeds=0-1"], cwd=tmp_path)
    assert result.code == 2 and "sweeper.extend=true" in result.stderr, result.stderr
    assert result.started == []


def test_the_validate_hook_refuses_before_the_probe_starts(tmp_path):
    project(tmp_path)
    result = run_in_process(sweep_main, ["--config-dir", "conf", "+experiment=mine", "width=-1"], cwd=tmp_path)
    assert result.code == 2 and "width=-1: must be >= 0" in result.stderr, result.stderr
    assert result.started == [] and result.written == []


def test_a_valid_command_line_starts_the_probe_and_only_then(tmp_path):
    """The control: the same project with a valid value starts the import probe (so the counting works)."""
    project(tmp_path)
    result = run_in_process(sweep_main, ["--config-dir", "conf", "+experiment=mine", "sweeper.dry_run=true"],
                            cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert [e for e, _ in result.started] == ["subprocess.Popen"], result.started   # the probe, once
    assert result.written == [] and "dry run: nothing launched" in result.stdout


@pytest.mark.parametrize(
    "module, needle",
    [
        (
            "def main(run, steps):\n    pass\n",
            "main(run, steps) cannot be called as main(run) (missing a required argument: 'steps')",
        ),
        ("def main():\n    pass\n", "main() cannot be called as main(run) (too many positional arguments)"),
        ("async def main(run):\n    pass\n", "main is an async function"),
        ("def main(run):\n    yield 1\n", "main is a generator function"),
        ("def main(*, run):\n    pass\n", "main(*, run) cannot be called as main(run)"),
    ],
)
def test_task_entry_signature_is_checked_by_the_probe(tmp_path, module, needle):
    project(tmp_path, module=module + "def validate(config):\n    pass\n")
    result = run_in_process(sweep_main, ["--config-dir", "conf", "+experiment=mine"], cwd=tmp_path)
    assert result.code == 2, result.stderr
    assert f"task.entry='mymod:main': {needle}" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.written == []


@pytest.mark.parametrize(
    "validate, needle",
    [
        ("def validate():\n    pass\n", "validate() cannot be called as validate(config)"),
        ("def validate(config, strict):\n    pass\n", "validate(config, strict) cannot be called as validate(config)"),
        ("def validate(config, *, launcher):\n    pass\n", None),  # takes the launcher: fine
    ],
)
def test_validate_hook_signature_is_checked_before_any_process(tmp_path, validate, needle):
    project(tmp_path, module="def main(run):\n    run.finish(val_loss=1.0)\n" + validate)
    result = run_in_process(
        sweep_main, ["--config-dir", "conf", "+experiment=mine", "sweeper.dry_run=true"], cwd=tmp_path
    )
    if needle is None:
        assert result.code == 0, result.stderr
        return
    assert result.code == 2 and f"task.validate='mymod:validate': {needle}" in result.stderr, result.stderr
    assert result.started == []
