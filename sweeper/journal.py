"""`python -m sweeper.journal ...`: the command's name; its code is sweeper.report.journal (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.report.journal import main as _main
    from sweeper.interrupts import exit_with

    exit_with(_main())
