"""`python -m sweeper.audit +experiment=NAME [key=value ...] [options]`: does a resumed run match, bit for bit?

    python -m sweeper.audit +experiment=rope                        # baseline variant, first seed, train.steps
    python -m sweeper.audit +experiment=rope train.steps=40 --stop-at 17 --mode kill
    python -m sweeper.audit +experiment=rope --variant nope --seed 3 --dir /tmp/audit

Options: --config-dir DIR (your own config dirs, as for `python -m sweeper`), --variant NAME (default: the
experiment's baseline), --seed N (default: the first of `seeds`), --steps N (audit the first N steps of the
run, default train.steps), --stop-at K (default: about N/2, off a checkpoint step), --mode stop|kill (stop:
the SIGTERM path; kill: SIGKILL, resume from the last periodic checkpoint), --threads N (CPU threads of every
audit process, default 1), --dir DIR (keep the audit runs there; default: a temporary folder, deleted when
the result is identical).

The config is composed exactly as `python -m sweeper` composes it (sweeper.config.sweep.compose_sweep); the
audit is the task's hook `task.audit` (the built-in trainer's: sweeper.train.audit:audit_resume). It trains the
run straight and stopped-then-resumed in real processes and compares hashes of the parameters, optimizer state,
RNG states and data order at every step (train/audit.py). Prints "result: bitwise identical" or the first step
and tensor that differ.
Exit status: 0 identical, 1 diverged (or an audit run failed), 2 bad input.

A sweep runs it as a preflight with `sweeper.audit=true`: `sweep_audit(plan)` audits the baseline variant
with the first seed in SWEEP_DIR/audit before any run starts and says why the sweep must not start, if so.
"""
from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from sweeper.cli.boundary import ArgumentParser, run_command
from sweeper.config.composition.argv import split_config_dirs, with_config_dirs
from sweeper.config.sweep import compose_sweep
from sweeper.docstrings import docstring
from sweeper.errors import UsageError
from sweeper.execute.audit import AuditFailed, audit_run_config, check_auditable


def _parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m sweeper.audit", add_help=False)
    p.add_argument("--variant")
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--stop-at", type=int, dest="stop_at")
    p.add_argument("--mode", choices=("stop", "kill"), default="stop")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dir", dest="work_dir")
    return p


def _select(sweep, variant: str | None, seed: int | None) -> dict:
    check_auditable(sweep.task, "python -m sweeper.audit")
    variant = variant or sweep.experiment.baseline
    if variant not in sweep.variant_configs:
        raise UsageError(f"--variant {variant}: experiment {sweep.experiment.name} has variants "
                         f"{', '.join(sweep.variant_configs)}")
    if seed is None:
        seed = sweep.seeds.first             # seeds=adaptive: a UsageError (no fixed first seed)
    if seed < 0:
        raise UsageError(f"--seed {seed}: a seed is a non-negative integer")
    return {**sweep.variant_configs[variant], "seed": seed}


def _check_work_dir(path: str) -> None:
    """--dir names a folder, existing or to be made: not a file, nor a path through one."""
    p = Path(path)
    for above in (p, *p.parents):
        if above.exists() and not above.is_dir():
            where = "is" if above == p else f"is inside {shlex.quote(str(above))}, which is"
            raise UsageError(f"--dir {shlex.quote(path)}: {where} not a directory; give a folder (it is made if "
                             f"missing) or leave --dir out for a temporary one")


def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper.audit", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(docstring(sys.modules[__name__]))
        return 0
    config_dirs, argv = split_config_dirs(argv)
    args, overrides = _parser().parse_known_args(argv)
    bad = next((o for o in overrides if o.startswith("-")), None)
    if bad:
        raise UsageError(f"unknown option {bad}: accepted are --config-dir, --variant, --seed, --steps, "
                         "--stop-at, --mode, --threads, --dir (and key=value config overrides)")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: must be a positive integer")
    if args.work_dir is not None:
        _check_work_dir(args.work_dir)
    sweep = compose_sweep(with_config_dirs(overrides, config_dirs))
    run_cfg = _select(sweep, args.variant, args.seed)

    temp = None if args.work_dir else tempfile.mkdtemp(prefix="sweeper-audit-")
    try:
        report = audit_run_config(sweep.task, run_cfg, args.work_dir or temp, steps=args.steps, stop_at=args.stop_at,
                                  mode=args.mode, threads=args.threads, experiment=sweep.experiment.name,
                                  variant=args.variant or sweep.experiment.baseline)
    except UsageError:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    except AuditFailed as e:
        print(f"sweeper.audit: an audit run failed: {e}", file=sys.stderr)
        return 1
    text = report.format()
    if temp and report.identical:
        shutil.rmtree(temp, ignore_errors=True)
        text = text.replace(f"audit dir: {report.work_dir}", "audit dir: (temporary, removed)")
    print(text)
    return 0 if report.identical else 1
