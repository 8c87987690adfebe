"""`python -m sweeper.report SWEEP_DIR [options]`: the command's name; its code is sweeper.cli.report."""
from sweeper.cli.report import main
from sweeper.interrupts import exit_with

exit_with(main())
