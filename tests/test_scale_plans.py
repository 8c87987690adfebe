"""Scale and concurrency (issue 40): Ctrl-C while a plan of thousands of runs is written, a typo in the last of
200 variants, and one sweep dir asked for from two project folders.

    python -m pytest -q -n 0 -p no:cacheprovider tests/test_scale_plans.py

Figures at 10,000 runs and 200 variants: benchmarks/bench_scale.py (results/bench_scale.md).
"""
from __future__ import annotations

import os
import time

import pytest

from sweeper.cli.sweep import main as sweep_main
from sweeper.run.files.manifest import MANIFEST
from tests.helpers.interrupt_at import interrupt_after
from tests.helpers.local_pool import user_project
from tests.helpers.no_process import run_in_process

TASK = 'import json\nprint(json.dumps({"val_loss": 1.0}))\n'


def many_variants(root, n: int, last: str) -> list[str]:
    """A project whose experiment has n variants (width=i), the last one's override `last`; its argv."""
    variants = {f"v{i}": [f"width={i}"] for i in range(n - 1)} | {f"v{n - 1}": [last]}
    user_project(root, TASK, variants, config="width: 0")
    return ["--config-dir", "conf", "+experiment=mine", "seeds=0"]


@pytest.mark.slow
def test_a_typo_in_the_last_of_200_variants_is_named_before_any_variant_is_composed(tmp_path):
    argv = many_variants(tmp_path, 200, "widht=199")
    t0 = time.process_time()
    result = run_in_process(sweep_main, argv, cwd=tmp_path)
    cpu = time.process_time() - t0
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1, result.stderr
    assert "experiment mine, variant v199: unknown config key 'widht'; top-level keys are:" in lines[0]
    assert result.started == [] and result.written == []
    assert cpu < 10, cpu      # one compose, not 200 (0.18 s each idle: 36 s); 1.5 s of CPU measured


@pytest.mark.parametrize("last, needle", [
    ("model=bigg", "variant v2: unknown model 'bigg': available model configs are small"),
    ("train.stepz=3", "variant v2: unknown config key 'train.stepz'; keys of train are: batch_size"),
])
def test_a_bad_key_or_group_option_in_a_variant_names_the_variant(tmp_path, last, needle):
    from sweeper.config.sweep import compose_sweep
    from sweeper.errors import UsageError

    with pytest.raises(UsageError, match="experiment rope, variant") as e:
        compose_sweep(["+experiment=rope", f"+experiment.variants.v2=['{last}']"], start_checks=False)
    assert needle in str(e.value)


@pytest.mark.slow
def test_the_same_sweep_dir_from_a_second_project_folder_is_refused(tmp_path):
    """Two project folders, the same experiment and sweeper.dir, different scripts: the second is refused (one
    line, exit 2, nothing started or written) instead of extending the first folder's sweep."""
    from sweeper.cli.sweep import overrides_of
    from sweeper.config.sweep import compose_sweep
    from sweeper.plan.make import make_plan, write_plan

    shared = tmp_path / "shared-sweep"
    first, second = tmp_path / "one", tmp_path / "two"
    for folder, value in ((first, 1.0), (second, 2.0)):
        user_project(folder, f'import json\nprint(json.dumps({{"val_loss": {value}}}))\n', {"a": [], "b": ["x=2"]},
                     config="x: 1")
    argv = ["--config-dir", "conf", "+experiment=mine", "seeds=0", f"sweeper.dir={shared}"]
    here = os.getcwd()
    try:
        os.chdir(first)
        write_plan(make_plan(compose_sweep(overrides_of(argv), start_checks=False), [0]), argv)
    finally:
        os.chdir(here)
    before = sorted(p.name for p in shared.rglob("*"))
    result = run_in_process(sweep_main, argv, cwd=second)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1, result.stderr
    assert f"holds a sweep of the task in {first}; this command runs the task in {second}" in lines[0]
    assert f"use another sweeper.dir, or run the command from {first} to resume it" in lines[0]
    assert result.started == [] and sorted(p.name for p in shared.rglob("*")) == before
    again = run_in_process(sweep_main, [*argv, "sweeper.dry_run=true"], cwd=first)    # the first folder: fine
    assert again.code == 0, again.stderr


@pytest.mark.slow
def test_ctrl_c_while_a_plan_of_thousands_of_runs_is_written_is_answered_at_once(tmp_path):
    """4,000 runs: the plan is written run by run; a SIGINT once writing has begun is answered between two runs
    (before: only once every run dir was written, 14.6 s at 4,000 runs). The manifest is whole or absent."""
    project = user_project(tmp_path / "p", TASK, {"a": [], "b": ["x=2"], "c": ["x=3"], "d": ["x=4"]}, config="x: 1")
    d = tmp_path / "s"
    args = ["--config-dir", "conf", "+experiment=mine", "seeds=0-999", f"sweeper.dir={d}", "sweeper.max_runs=4000",
            "sweeper.report=false"]
    t = interrupt_after("sweep dir ", 0.3, args, cwd=project)
    assert t.code == 130, t.output[-2000:]
    assert "sweeper: interrupted;" in t.output and "Traceback" not in t.output, t.output[-2000:]
    written = len(list((d / "runs").glob("*/seed_*"))) if (d / "runs").exists() else 0
    assert written < 4000, written                     # stopped part way, not after the whole plan
    assert t.answered_s < 5.0, t.answered_s            # 1.5 s target on an idle machine (bench_scale.md)
    assert not (d / MANIFEST).exists() or written == 4000
