"""`python -m sweeper.resume ...`: the command's name; its code is sweeper.cli.resume (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.cli.resume import main as _main
    from sweeper.interrupts import exit_with

    exit_with(_main())
