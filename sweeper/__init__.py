"""sweeper: seed sweeps that tell you whether a change really helps.

    python -m sweeper +experiment=rope seeds=0-3      # every variant x every seed, pinned parallel runs, report
    python -m sweeper.report SWEEP_DIR                 # the decision report of a (partial) sweep
    run = sweeper.init()                               # inside your own training code: the run API (sweeper.run)

Importing `sweeper` is light: torch, submitit and matplotlib are imported only where they are used.
"""
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in ("init", "Run"):
        import sweeper.run  # deferred: `import sweeper` stays light (the CLI and the report need no run API)

        return getattr(sweeper.run, name)
    raise AttributeError(f"module 'sweeper' has no attribute {name!r}")
