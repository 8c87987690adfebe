"""`python -m sweeper.report SWEEP_DIR [options]`: the command's name; its code is sweeper.report.build."""
from sweeper.interrupts import exit_with
from sweeper.report.build import main

exit_with(main())
