"""sweeper: seed sweeps that tell you whether a change really helps.

    python -m sweeper +experiment=rope seeds=0-3      # every variant x every seed, pinned parallel runs, report
    python -m sweeper.report SWEEP_DIR                 # the decision report of a (partial) sweep
    run = sweeper.init()                               # inside your own training code: the run API (sweeper.run)

Importing `sweeper` is light: torch, submitit and matplotlib are imported only where they are used.
"""
import importlib.util
import os
import sys

__version__ = "0.1.0"

# The demo trainer, the kernels and the configs install as sweeper.train, sweeper.kernels and sweeper.conf (the
# repo's top-level train/, kernels/ and conf/, mapped by pyproject.toml's package-dir). Run from a source checkout
# (its root first on sys.path: `python -m sweeper` in the checkout, installed or not), this folder is imported
# instead of the installed package, and those three live beside it: the finder below maps exactly these three
# names to the checkout's own folders. Elsewhere (a wheel, site-packages) they sit inside the package and it does
# nothing: it never maps a name to a folder outside a checkout of this project.
_HERE = os.path.dirname(os.path.realpath(__file__))   # real: a run may import it through a link (config.import_path)
_MAPPED = {"sweeper.train": "train", "sweeper.kernels": "kernels", "sweeper.conf": "conf"}


def _checkout_root() -> str | None:
    """The source checkout this package sits in, or None (installed: train/ is inside the package)."""
    root = os.path.dirname(_HERE)
    if os.path.isdir(os.path.join(_HERE, "train")):
        return None
    try:
        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
            ours = 'name = "seed-sweeper"' in f.read()
    except OSError:
        return None
    return root if ours else None


class _CheckoutFinder:
    """Finds sweeper.train / sweeper.kernels / sweeper.conf in the checkout's top-level folders (see above)."""

    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = _MAPPED.get(fullname)
        if folder is None:
            return None
        where = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(fullname, os.path.join(where, "__init__.py"),
                                                      submodule_search_locations=[where])


_ROOT = _checkout_root()
if _ROOT is not None and not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _CheckoutFinder(_ROOT))


def __getattr__(name: str):
    if name in ("init", "Run"):
        import sweeper.run  # deferred: `import sweeper` stays light (the CLI and the report need no run API)

        return getattr(sweeper.run, name)
    raise AttributeError(f"module 'sweeper' has no attribute {name!r}")
