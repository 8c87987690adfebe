"""`python -m sweeper.report SWEEP_DIR [options]`: the decision report of a sweep (any sweep dir, interrupted too).

    python -m sweeper.report SWEEP_DIR                      # finished, partial or interrupted sweep
    python -m sweeper.report NEW_SWEEP --against OLD_SWEEP  # same variants, new vs old (sweeper.analysis.compare)
    python -m sweeper.report SWEEP_DIR --no-plots --alpha 0.01 --min-seeds 4 --resamples 2000 --seed 1
    python -m sweeper.report MULTIRUN_DIR --baseline 'lr=0.001' --metric acc --higher-is-better

Every variant is compared with the experiment's baseline, metric and direction as the manifest records them;
--baseline / --metric / --higher-is-better / --lower-is-better override them (a Hydra multirun's manifest may
record none: with more than one variant the report then asks for --baseline). Writing: sweeper.report.write.
"""
from __future__ import annotations

import sys

from sweeper.cli.boundary import ArgumentParser, run_command
from sweeper.config.decision import DecisionOptions, ReportFlags
from sweeper.docstrings import docstring
from sweeper.errors import UsageError

FLAGS = {"alpha": "--alpha", "min_seeds": "--min-seeds", "n_resamples": "--resamples", "seed": "--seed"}


def _parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m sweeper.report", description=docstring(sys.modules[__name__]).split("\n\n")[0])
    p.add_argument("sweep_dir", help="sweep directory (holds the sweep's manifest and runs/)")
    p.add_argument("--against", metavar="OLD_SWEEP", help="compare every variant with the same variant of OLD_SWEEP")
    p.add_argument("--any-experiment", action="store_true", help="with --against: compare even when the two sweeps "
                   "record different experiments (refused otherwise)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots (faster)")
    default = DecisionOptions()           # the flags' defaults are the schema's (sweeper.config.decision), shown
    own = "the sweep's own sweeper.decision, else"       # a flag not given: what the sweep recorded, else the default
    p.add_argument("--alpha", type=float, help=f"family-wise error rate (default: {own} {default.alpha})")
    p.add_argument("--min-seeds", type=int, help=f"usable seeds per arm below which: insufficient (default: {own} "
                   f"{default.min_seeds})")
    p.add_argument("--resamples", type=int, help=f"bootstrap / Monte Carlo resamples (default: {own} "
                   f"{default.n_resamples})")
    p.add_argument("--seed", type=int, help=f"RNG seed of every resampling step (default: {own} {default.seed})")
    p.add_argument("--baseline", metavar="VARIANT", help="the variant every other is compared with "
                   "(default: the manifest's experiment.baseline)")
    p.add_argument("--metric", metavar="NAME", help="the final metric to decide on (default: the manifest's)")
    p.add_argument("--journal", metavar="DIR", help="record the sweep's entry in DIR/journal.md + .jsonl (default: "
                   "the folder holding the sweep dir; off: no journal entry)")
    direction = p.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", dest="lower_is_better", action="store_false", default=None,
                           help="the metric is better when higher (accuracy, reward)")
    direction.add_argument("--lower-is-better", dest="lower_is_better", action="store_true", default=None,
                           help="the metric is better when lower (loss; the default)")
    return p


def main(argv: list[str] | None = None) -> int:
    return run_command("sweeper.report", _main, argv)


def _main(argv: list[str], state: dict) -> int:
    args = _parser().parse_args(argv)
    decision = ReportFlags.parse({"alpha": args.alpha, "min_seeds": args.min_seeds, "n_resamples": args.resamples,
                                  "seed": args.seed}, FLAGS)      # unset flags: the sweep's own, else the defaults
    from sweeper.report.write import compare_sweeps, report_sweep  # deferred: pandas and scipy (about 1 s), once
    #                                                                the flags are checked (bad input answers fast)
    unwritten: list[str] = []
    options = dict(metric=args.metric, lower_is_better=args.lower_is_better, unwritten=unwritten)
    if args.any_experiment and not args.against:
        raise UsageError("--any-experiment applies with --against OLD_SWEEP only")
    if args.against:
        if args.baseline is not None:
            raise UsageError("--baseline does not apply with --against (each variant is compared with the "
                             "same variant of the other sweep)")
        text = compare_sweeps(args.sweep_dir, args.against, decision, plots=not args.no_plots,
                              any_experiment=args.any_experiment, **options)
    else:
        text = report_sweep(args.sweep_dir, decision, plots=not args.no_plots, baseline=args.baseline,
                            journal=args.journal, **options)
    print(text)
    if unwritten:                  # the decision table is above; what could not be written is a fault (exit 1)
        print(f"sweeper.report: error: {len(unwritten)} file(s) not written ({unwritten[0]}); the decision table "
              f"above is complete", file=sys.stderr)
        return 1
    return 0
