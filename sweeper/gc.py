"""`python -m sweeper.gc ...`: the command's name; its code is sweeper.cli.gc (this module only starts it)."""
if __name__ == "__main__":
    from sweeper.interrupts import start

    def _load():
        from sweeper.cli.gc import main  # deferred: imported once Ctrl-C is an interrupt (start)

        return main

    start("sweeper.gc", _load)
