"""python -m sweeper +experiment=NAME seeds=0-3: plan, launch and report a seed sweep (sweeper.cli.sweep.main)."""
from sweeper.interrupts import start


def _load():
    from sweeper.cli.sweep import main  # deferred: hydra (0.2 s), imported once Ctrl-C is an interrupt (start)

    return main


start("sweeper", _load)
