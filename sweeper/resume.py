"""`python -m sweeper.resume ...`: the command's name; its code is sweeper.cli.resume (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.interrupts import start

    def _load():
        from sweeper.cli.resume import main  # deferred: imported once Ctrl-C is an interrupt (start)

        return main

    start("sweeper.resume", _load)
