"""`python -m sweeper.audit ...`: the command's name; its code is sweeper.cli.audit (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.cli.audit import main as _main
    from sweeper.interrupts import exit_with

    exit_with(_main())
