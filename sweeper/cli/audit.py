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

The config is composed exactly as `python -m sweeper` composes it (sweeper.config.compose.compose_sweep); the
audit knows the built-in trainer only (task.entry=sweeper.train:main). Trains the run straight and stopped-then-resumed
in real processes and compares hashes of the parameters, optimizer state, RNG states and data order at every
step (train/audit.py). Prints "result: bitwise identical" or the first step and tensor that differ.
Exit status: 0 identical, 1 diverged (or an audit run failed), 2 bad input.

A sweep runs it as a preflight with `sweeper.audit=true`: `sweep_audit(plan)` audits the baseline variant
with the first seed in SWEEP_DIR/audit before any run starts and says why the sweep must not start, if so.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from sweeper.errors import UsageError

PREFLIGHT_MAX_STEPS = 100   # the preflight audits the first steps of the baseline run only


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):          # one line and exit 2, like every sweeper error
        raise UsageError(message)


def _parser() -> _Parser:
    p = _Parser(prog="python -m sweeper.audit", add_help=False)
    p.add_argument("--variant")
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--stop-at", type=int, dest="stop_at")
    p.add_argument("--mode", choices=("stop", "kill"), default="stop")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dir", dest="work_dir")
    return p


def audit_run_config(run_cfg: dict, work_dir: str | Path, *, steps: int | None = None, stop_at: int | None = None,
                     mode: str = "stop", threads: int | None = 1, experiment: str | None = None,
                     variant: str | None = None):
    """Audit one resolved run config (what config.yaml holds) in work_dir; returns train.audit.AuditReport
    (experiment/variant name the run in it). Bad audit options raise UsageError; a crashed audit process raises
    train.audit.AuditError."""
    from sweeper.train.audit import audit_resume

    try:
        return audit_resume(run_cfg, work_dir, steps=steps, stop_at=stop_at, mode=mode, threads=threads,
                            experiment=experiment, variant=variant)
    except ValueError as e:
        raise UsageError(str(e)) from None


def preflight_audit(plan, log=print):
    """The sweep preflight (`sweeper.audit=true`): audit the baseline variant's first-seed run in
    SWEEP_DIR/audit over its first min(train.steps, 100) steps; logs the report and returns it. The caller
    refuses to launch when `report.identical` is False."""
    run = next(r for r in plan.runs if r.variant == plan.experiment.baseline)
    steps = min(run.total_steps or PREFLIGHT_MAX_STEPS, PREFLIGHT_MAX_STEPS)
    log(f"resume audit of {run.label} over {steps} steps (sweeper.audit=true) ...")
    report = audit_run_config(run.config, plan.sweep_dir / "audit", steps=steps, experiment=plan.experiment.name,
                              variant=run.variant)
    log(report.format())
    return report


def sweep_audit(plan, log=print) -> str | None:
    """preflight_audit for a sweep: None when the resume is bitwise identical, else why not to launch."""
    from sweeper.train.audit import AuditError

    try:
        report = preflight_audit(plan, log=log)
    except AuditError as e:
        return f"resume audit failed: {e}"
    if not report.identical:
        return f"resume audit diverged; not launching (audit runs kept in {plan.sweep_dir / 'audit'})"
    return None


def _select(sweep, variant: str | None, seed: int | None) -> dict:
    from sweeper.execute.preflight import AUDITED_ENTRY
    from sweeper.config.seeds import parse_seeds

    if sweep.task.entry != AUDITED_ENTRY:
        raise UsageError(f"the audit knows the built-in trainer only (task.entry={AUDITED_ENTRY}); this experiment "
                         f"runs {sweep.task.name}")
    variant = variant or sweep.experiment.baseline
    if variant not in sweep.variant_configs:
        raise UsageError(f"--variant {variant}: experiment {sweep.experiment.name} has variants "
                         f"{', '.join(sweep.variant_configs)}")
    if seed is None:
        seed = parse_seeds(sweep.cfg["seeds"])[0]
    if seed < 0:
        raise UsageError(f"--seed {seed}: a seed is a non-negative integer")
    return {**sweep.variant_configs[variant], "seed": seed}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    from sweeper.train.audit import AuditError

    temp = None
    try:
        from sweeper.config.compose import compose_sweep, split_config_dirs, with_config_dirs

        config_dirs, argv = split_config_dirs(argv)
        args, overrides = _parser().parse_known_args(argv)
        bad = next((o for o in overrides if o.startswith("-")), None)
        if bad:
            raise UsageError(f"unknown option {bad}: accepted are --config-dir, --variant, --seed, --steps, "
                             "--stop-at, --mode, --threads, --dir (and key=value config overrides)")
        if args.threads is not None and args.threads < 1:
            raise UsageError(f"--threads {args.threads}: must be a positive integer")
        sweep = compose_sweep(with_config_dirs(overrides, config_dirs))
        run_cfg = _select(sweep, args.variant, args.seed)
        work_dir = args.work_dir or (temp := tempfile.mkdtemp(prefix="sweeper-audit-"))
        report = audit_run_config(run_cfg, work_dir, steps=args.steps, stop_at=args.stop_at, mode=args.mode,
                                  threads=args.threads, experiment=sweep.experiment.name,
                                  variant=args.variant or sweep.experiment.baseline)
    except UsageError as e:
        print(f"sweeper.audit: error: {e}", file=sys.stderr)
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
        return 2
    except AuditError as e:
        print(f"sweeper.audit: an audit run failed: {e}", file=sys.stderr)
        return 1
    text = report.format()
    if temp and report.identical:
        shutil.rmtree(temp, ignore_errors=True)
        text = text.replace(f"audit dir: {report.work_dir}", "audit dir: (temporary, removed)")
    print(text)
    return 0 if report.identical else 1


if __name__ == "__main__":
    sys.exit(main())
