"""`python -m sweeper.slurm ...`: the command's name; its code is sweeper.cli.slurm (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.cli.slurm import main as _main
    from sweeper.interrupts import exit_with

    exit_with(_main())
