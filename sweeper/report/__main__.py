"""`python -m sweeper.report SWEEP_DIR [options]`: the command's name; its code is sweeper.cli.report."""
from sweeper.interrupts import start


def _load():
    from sweeper.cli.report import main  # deferred: pandas (0.5 s), imported once Ctrl-C is an interrupt (start)

    return main


start("sweeper.report", _load)
