"""The paired-difference plot draws each seed's variant-minus-baseline and is written as a real PNG."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sweeper.plots import paired_differences, write_plots
from sweeper.report import analyze_sweep
from synthetic_sweep import write_sweep


def test_paired_differences_are_per_seed_variant_minus_baseline_on_common_seeds(tmp_path):
    finals = {"base": [3.0, 3.1, 3.2, 3.05], "new": [2.5, None, 2.62, 2.58]}
    root = write_sweep(tmp_path / "s", finals, baseline="base", status={("new", 1): "failed"})
    inp = analyze_sweep(root, n_resamples=200)
    seeds, d = paired_differences(inp.analysis)["new"]
    assert list(seeds) == [0, 2, 3]
    np.testing.assert_allclose(d, [2.5 - 3.0, 2.62 - 3.2, 2.58 - 3.05])
    paths = write_plots(tmp_path / "plots", inp.curves, inp.analysis)
    png = Path(paths["paired_difference"])
    assert png.name == "paired_difference.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image as mpimg

    assert mpimg.imread(png).shape[0] > 100
