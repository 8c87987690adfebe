"""`python -m sweeper.slurm ...`: the command's name; its code is sweeper.backends.slurm.backend (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.backends.slurm.backend import main as _main
    from sweeper.interrupts import exit_with

    exit_with(_main())
