"""`python -m sweeper [--config-dir DIR] +experiment=NAME seeds=0-3 [key=value ...]`: plan, launch, report a sweep.

    python -m sweeper +experiment=rope seeds=0-3                 # 3 variants x 4 seeds on the local pool
    python -m sweeper +experiment=rope seeds=0-1 train.steps=50  # any config key, for every variant
    python -m sweeper +experiment=rope sweeper.dry_run=true      # print the plan, launch nothing
    python -m sweeper +experiment=rope launcher=slurm            # a Slurm job array through submitit
    python -m sweeper +experiment=rope --cfg                     # print the composed config
    python -m sweeper --config-dir conf +experiment=mine         # your experiment, in ./conf/experiment/mine.yaml

Your own configs: `--config-dir DIR` (also `-cd DIR`, `--config-dir=DIR`, repeatable) adds DIR to Hydra's
config search path, as `hydra.searchpath=[file:///abs/DIR]` does. DIR holds experiment/NAME.yaml and any
config groups of your own. An experiment for your own code starts with
`defaults: [override /task: custom]` and sets task.entry (module:function, called with the run) or
task.command (a program: your script as it is, or one that calls sweeper.init()); its other top-level
keys are what each run gets as
run.config (with `seed` set per run). Runs start in the directory the sweep is started in (task.cwd).

Bad input (unknown experiment or key, malformed override, bad seeds, bad values) is one line on stderr and
exit status 2, before any directory is created or any run started: so is a task that cannot start (an
entry point that does not import, a command or script that does not exist) or a run config the task's
validate hook refuses. Exit status: 0 when every run finished
(or diverged: an outcome, flagged in the report), 1 when a run failed or was left unfinished, 130 after Ctrl-C
(sweeper.execute.launch; errors through sweeper.cli.boundary: SWEEPER_DEBUG=1 shows a traceback).
"""
from __future__ import annotations

import sys

from sweeper.cli.boundary import run_command
from sweeper.config.composition.argv import split_config_dirs, with_config_dirs
from sweeper.config.composition.compose import compose, to_yaml
from sweeper.config.launchers import backend_of
from sweeper.config.sweep import Sweep, check_task_started, compose_sweep
from sweeper.docstrings import docstring
from sweeper.errors import UsageError
from sweeper.execute.end import run_to_end
from sweeper.execute.launch import fix_launch
from sweeper.execute.preflight import check_preflight_options
from sweeper.plan.make import Plan, format_plan
from sweeper.plan.pipeline import plan_sweep
from sweeper.store.lookup import find_reuse, format_reuse, store_folders

USAGE = "\n\n".join(docstring(sys.modules[__name__]).split("\n\n")[:3])


def overrides_of(argv: list[str]) -> list[str]:
    """The Hydra overrides of a command line: --config-dir/-cd DIR become hydra.searchpath; no other options."""
    config_dirs, overrides = split_config_dirs(argv)
    bad = next((a for a in overrides if a.startswith("-")), None)
    if bad:
        raise UsageError(f"unknown option {bad}: accepted are --config-dir DIR (-cd DIR), --cfg, --help, --debug, "
                         f"and key=value overrides")
    return with_config_dirs(overrides, config_dirs)


def backend_of_sweep(sweep: Sweep):
    """(the backend, its typed launcher config) for launcher.name: checked, nothing started."""
    backend = backend_of(sweep.launcher)()
    return backend, backend.config(sweep.launcher)


def prepare(argv: list[str]):
    """Everything that can be checked before launching: (plan or AdaptiveSweep, backend, launcher config).

    Order of work: first every check that needs none of the user's code (keys, types, ranges, seeds, names, the
    plan against its sweep dir, the paths it will write, the plan against this machine's GPUs and cores: only
    nvidia-smi runs), then the task's validate hook (the user's code, imported here), then the processes: the
    task's import probe and, while it imports, the backend's probes (sbatch --test-only). Bad input is answered
    before any process of the user's code starts."""
    sweep = compose_sweep(overrides_of(argv), start_checks=False)
    check_preflight_options(sweep)
    backend, conf = backend_of_sweep(sweep)
    if sweep.seeds.adaptive:                       # seeds=adaptive: sweeper.adaptive.driver plans look by look
        from sweeper.adaptive.driver import prepare_adaptive  # deferred: scipy (about 1 s), seeds=adaptive only

        adaptive = prepare_adaptive(sweep, backend, conf)
        backend.check_machine(conf)
        check_task_started(sweep, alongside=lambda: backend.probe(conf))
        return adaptive, backend, conf
    plan = plan_sweep(sweep)                       # sweeper.plan.pipeline: nothing written yet
    plan = fix_launch(plan, backend, conf)         # the plan against this machine's devices and cores
    store_folders(plan)                            # sweeper.reuse_from: folders that exist, before any process
    check_task_started(sweep, alongside=lambda: backend.probe(conf))
    return plan, backend, conf


def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    if "--cfg" in argv:
        print(to_yaml(compose(overrides_of([a for a in argv if a != "--cfg"]))), end="")
        return 0
    plan, backend, conf = prepare(argv)
    if not isinstance(plan, Plan):                   # seeds=adaptive (an AdaptiveSweep): looks, then the report
        return plan.run(backend, conf, argv, state)
    for warning in plan.sweep.warnings:
        print(f"sweeper: warning: {warning}", file=sys.stderr)
    reuse = find_reuse(plan)                       # sweeper.store: earlier sweeps' finished twins of its runs
    if plan.sweep.sweeper.dry_run:
        print(format_plan(plan))
        print(format_reuse(plan, reuse))
        for note in plan.notes:
            print(f"note: {note}")
        print("dry run: nothing launched")
        return 0
    return run_to_end(plan, backend, conf, argv, state)
