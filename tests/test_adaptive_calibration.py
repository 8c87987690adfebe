"""The stored calibration of the adaptive looks (sweeper/adaptive/calibration.npz) against the real test:
random stored p-values recomputed with sweeper.analysis.robust, the paths it was computed on, the file's owner."""
import ast
from pathlib import Path

import numpy as np
import pytest

from sweeper.adaptive import calibration

ROOT = Path(__file__).resolve().parent.parent


def test_stored_pvalues_are_the_real_tests_on_the_stored_paths():
    bad = calibration.check(24, pick=7)              # both designs, n from 2 to MAX_N, random paths
    assert not bad, bad


@pytest.mark.parametrize("paired", [True, False], ids=["paired", "independent"])
def test_stored_pvalues_are_exact_null_pvalues(paired):
    """Under the null each test is exact: P(p <= u) <= u on the paths, and close to it where the test is fine."""
    for n in (6, 10, 16):
        p = calibration.pvalues(paired, n, robust=True)
        assert p.shape == (calibration.PATHS,) and p.min() > 0 and p.max() <= 1
        for u in (0.01, 0.05, 0.2):
            share = float((p <= u).mean())
            se = np.sqrt(u * (1 - u) / calibration.PATHS)
            assert share <= u + 4 * se, (n, u, share)
            if n >= 10:
                assert share >= u - 6 * se - 2.0 / 2**n, (n, u, share)    # a permutation test's discreteness
        t = calibration.pvalues(paired, n, robust=False)
        assert np.corrcoef(p, t)[0, 1] > 0.9          # the same paths: both tests see the same data


def test_the_paths_are_fixed_by_the_seed_and_checked():
    z = np.load(calibration.FILE)
    assert str(z["checksum"]) == calibration.checksum()
    assert z["paired_hits"].shape == (calibration.PATHS, calibration.MAX_N - 1)
    assert list(z["paired_size"][:11]) == [2**n for n in range(2, 13)]                 # exact up to 12 pairs
    with pytest.raises(ValueError, match="stored up to 16"):
        calibration.pvalues(True, calibration.MAX_N + 1, robust=True)


def test_only_the_calibration_module_names_its_file():
    owners = []
    for path in (ROOT / "sweeper").rglob("*.py"):
        if "calibration.npz" in path.read_text(encoding="utf-8"):
            owners.append(path.relative_to(ROOT).as_posix())
    assert owners == ["sweeper/adaptive/calibration.py"] or sorted(owners) == sorted(
        ["sweeper/adaptive/calibration.py", "sweeper/adaptive/design.py"]), owners
    tree = ast.parse((ROOT / "sweeper/adaptive/design.py").read_text(encoding="utf-8"))
    assert not any(isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "load" for n in ast.walk(tree))
