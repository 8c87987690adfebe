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
(or diverged: an outcome, flagged in the report), 1 when a run failed or was left unfinished, 130 after Ctrl-C.
"""
from __future__ import annotations

import importlib
import sys

from sweeper.errors import UsageError

USAGE = "\n\n".join(__doc__.split("\n\n")[:3])


def validate_launcher(launcher: dict):
    """The backend module and its validated config for launcher.name (local | slurm)."""
    name = launcher.get("name")
    if name not in ("local", "slurm"):
        raise UsageError(f"launcher.name={name!r}: accepted values are local, slurm")
    backend = importlib.import_module(f"sweeper.backends.{name}.backend")
    return backend, backend.parse_launcher_config(launcher)


def overrides_of(argv: list[str]) -> list[str]:
    """The Hydra overrides of a command line: --config-dir/-cd DIR become hydra.searchpath; no other options."""
    from sweeper.config.compose import split_config_dirs, with_config_dirs

    config_dirs, overrides = split_config_dirs(argv)
    bad = next((a for a in overrides if a.startswith("-")), None)
    if bad:
        raise UsageError(f"unknown option {bad}: accepted are --config-dir DIR (-cd DIR), --cfg, --help, and "
                         f"key=value overrides")
    return with_config_dirs(overrides, config_dirs)


def prepare(argv: list[str]):
    """Everything that can be checked before launching: returns (plan, backend, launcher config)."""
    from sweeper.config.compose import compose_sweep
    from sweeper.plan.make import check_size, count_seeds, make_plan, max_runs, reconcile
    from sweeper.execute.preflight import check_preflight_options
    from sweeper.config.seeds import parse_seeds

    sweep = compose_sweep(overrides_of(argv))
    max_runs(sweep)
    from sweeper.config.seeds import is_adaptive

    if is_adaptive(sweep.cfg["seeds"]):            # seeds=adaptive: sweeper.adaptive.driver plans look by look
        from sweeper.adaptive.driver import prepare_adaptive

        return prepare_adaptive(sweep)
    n_seeds = count_seeds(sweep.cfg["seeds"])      # a huge range is refused before it is expanded
    check_size(sweep, {v: len(own) if own is not None else n_seeds for v, own in sweep.variant_seeds.items()}
               or {v: n_seeds for v in sweep.variant_configs})
    seeds = parse_seeds(sweep.cfg["seeds"])
    backend, launcher_cfg = validate_launcher(sweep.launcher)
    check_preflight_options(sweep)
    plan = reconcile(make_plan(sweep, seeds), extend=bool(sweep.sweeper.get("extend")))
    fix_launch(plan, backend, launcher_cfg)
    return plan, backend, launcher_cfg


def fix_launch(plan, backend, launcher_cfg):
    """plan.launch: the settings recorded in the sweep dir, else the backend's for the launcher config and the
    FULL plan (never the runs left); what a backend without launch_settings gives: its threads key."""
    from sweeper.plan.make import keep_recorded_launch
    from sweeper.run.rundir import Launch

    settings = getattr(backend, "launch_settings", None)
    if settings is not None:
        computed = settings(launcher_cfg, len(plan.runs))
    else:
        threads = getattr(launcher_cfg, "threads_per_run", None) or getattr(launcher_cfg, "cpus_per_task", None)
        computed = Launch(threads_per_run=threads)
    return keep_recorded_launch(plan, computed)


def interrupted(prog: str, sweep_dir=None) -> int:
    """The one line after Ctrl-C / SIGTERM, and exit status 130."""
    from sweeper import interrupts

    interrupts.quiet()
    where = (f"finished runs are kept. Resume with the same command or `python -m sweeper.resume {sweep_dir}`"
             if sweep_dir is not None else "nothing was started; run the same command again")
    print(f"{prog}: interrupted; {where}", file=sys.stderr, flush=True)
    return interrupts.INTERRUPTED


def refuse(error: Exception) -> int:
    """The one line for a UsageError, exit status 2; unless Ctrl-C came first: a library (OmegaConf, Hydra)
    that caught our KeyboardInterrupt and raised its own error becomes a UsageError here, and that is still
    an interrupt (exit 130), not bad input."""
    from sweeper import interrupts

    if interrupts.fired():
        raise KeyboardInterrupt from None
    print(f"sweeper: error: {error}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    from sweeper import interrupts

    interrupts.install()
    argv = list(sys.argv[1:] if argv is None else argv)
    state: dict = {}
    try:
        return _main(argv, state)
    except KeyboardInterrupt:
        return interrupted("sweeper", state.get("sweep_dir"))
    except Exception:
        if interrupts.fired():                     # a library turned our KeyboardInterrupt into another error
            return interrupted("sweeper", state.get("sweep_dir"))
        raise


def _main(argv: list[str], state: dict) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    try:
        if "--cfg" in argv:
            from sweeper.config.compose import compose, to_yaml

            print(to_yaml(compose(overrides_of([a for a in argv if a != "--cfg"]))), end="")
            return 0
        plan, backend, launcher_cfg = prepare(argv)
    except UsageError as e:
        return refuse(e)
    if getattr(plan, "adaptive", False):             # sweeper.adaptive.driver.AdaptiveSweep: looks, then report
        return plan.run(backend, launcher_cfg, argv, state)
    from sweeper.plan.make import format_plan

    for warning in plan.sweep.warnings:
        print(f"sweeper: warning: {warning}", file=sys.stderr)
    if plan.sweep.sweeper.get("dry_run"):
        print(format_plan(plan))
        for note in plan.notes:
            print(f"note: {note}")
        print("dry run: nothing launched")
        return 0
    return execute(plan, backend, launcher_cfg, argv, state)


def execute(plan, backend, launcher_cfg, argv: list[str], state: dict | None = None) -> int:
    """Lock the sweep dir, write the plan, repair stale runs, launch, report; the exit status (also `python -m
    sweeper.resume`). KeyboardInterrupt (Ctrl-C, SIGTERM) propagates: the caller prints `interrupted`."""
    from sweeper.plan.lock import SweepLocked, sweep_lock
    from sweeper.plan.make import repair_stale, write_plan
    from sweeper.execute.preflight import run_preflights
    from sweeper.report.live import Progress

    state = {} if state is None else state
    try:
        with sweep_lock(plan.sweep_dir):
            write_plan(plan, argv)
            state["sweep_dir"] = plan.sweep_dir
            progress = Progress(total=len(plan.runs))
            progress.log(f"sweep dir {plan.sweep_dir}: {len(plan.runs)} runs "
                         f"({len(plan.experiment.variants)} variants x {len(plan.seeds)} seeds)")
            for note in plan.notes:
                progress.log(f"note: {note}")
            stale = repair_stale(plan)
            if stale:
                progress.log(f"repaired {len(stale)} run(s) left `running` by a killed sweeper (now interrupted, "
                             f"resumable): {', '.join(stale)}")
            launch_plan, refusal = run_preflights(plan, progress)
            if refusal:
                print(f"sweeper: error: {refusal}", file=sys.stderr)
                return 1
            statuses = backend.launch(launch_plan, launcher_cfg, progress)
    except SweepLocked as e:
        print(f"sweeper: error: {e}", file=sys.stderr)
        return 2
    except UsageError as e:           # write_plan (another plan's run config) or the backend refusing the launch
        return refuse(e)
    if statuses is None:   # submitted without waiting (launcher.wait=false)
        print(f"submitted; report later with `python -m sweeper.report {plan.sweep_dir}`")
        return 0
    if plan.sweep.sweeper.get("report", True):
        from sweeper.report.build import report_sweep

        print(report_sweep(plan.sweep_dir, plots=True, journal=plan.sweep.sweeper.get("journal")))
    print(f"sweep dir: {plan.sweep_dir}")
    from sweeper.run.rundir import KEEP

    return 1 if any(s not in KEEP for s in statuses.values()) else 0
