"""`python -m sweeper.journal ...`: the command's name; its code is sweeper.cli.journal (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.cli.journal import main as _main
    from sweeper.interrupts import exit_with

    exit_with(_main())
