"""The build hook: pip, uv and `python -m build` run it (through pyproject.toml's setuptools backend) in every build
of this checkout (wheel, sdist, editable, metadata); nobody runs it by hand.

    pip install -e .        # or: pip install .  /  pip wheel .

Why it exists: the repo's top-level kernels/ folder installs as `sweeper.kernels` (pyproject.toml's package-dir),
but while the checkout's root is on the build's sys.path (PYTHONPATH holding the checkout, or a frontend that runs
the backend with `python -c` in it) it would also be importable as a top-level `kernels` package. Hugging Face's
`kernels` distribution (which transformers 5 installs) registers an `egg_info.writers` entry point,
`kernels._internals.locking:write_egg_lockfile`, that setuptools imports in every build of every project: our
folder would shadow it and the build would fail with "No module named 'kernels._internals'". So the build drops the
checkout's root from sys.path before setuptools loads any entry point; it imports nothing from the checkout itself.
Everything else (packages, package-dir, metadata) is in pyproject.toml.
"""
import os
import sys

from setuptools import setup

_ROOT = os.path.dirname(os.path.abspath(__file__))


def _not_the_root(entry: str) -> bool:
    return os.path.abspath(entry or os.curdir) != _ROOT


sys.path[:] = [entry for entry in sys.path if _not_the_root(entry)]
_OURS = os.path.join(_ROOT, "kernels") + os.sep
for _name in [n for n in sys.modules if n == "kernels" or n.startswith("kernels.")]:
    if (getattr(sys.modules[_name], "__file__", None) or "").startswith(_OURS):
        del sys.modules[_name]        # a `kernels` imported from the checkout's folder before this ran

setup()
