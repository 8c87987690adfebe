"""The paired-difference plot draws each seed's variant-minus-baseline and is written as a real PNG."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sweeper.analysis.analyze import analyze_sweep
from sweeper.config.decision import DecisionOptions
from sweeper.report.plots import paired_differences, write_plots
from tests.helpers.synthetic_sweep import write_sweep


@pytest.mark.slow
def test_paired_differences_are_per_seed_variant_minus_baseline_on_common_seeds(tmp_path):
    finals = {"base": [3.0, 3.1, 3.2, 3.05], "new": [2.5, None, 2.62, 2.58]}
    root = write_sweep(tmp_path / "s", finals, baseline="base", status={("new", 1): "failed"})
    inp = analyze_sweep(root, DecisionOptions(n_resamples=200))
    seeds, d = paired_differences(inp.analysis)["new"]
    assert list(seeds) == [0, 2, 3]
    np.testing.assert_allclose(d, [2.5 - 3.0, 2.62 - 3.2, 2.58 - 3.05])
    paths = write_plots(tmp_path / "plots", inp.curves, inp.analysis)
    png = Path(paths["paired_difference"])
    assert png.name == "paired_difference.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image as mpimg

    assert mpimg.imread(png).shape[0] > 100


@pytest.mark.slow
def test_grad_flow_heatmap_shows_each_layers_share_per_variant_and_a_dead_layer(tmp_path):
    """grad_flow.png reads the monitor's health/grad_share/LAYER scalars: mean over seeds per (layer, step)."""
    import pandas as pd

    from sweeper.report.plots import _grad_flow_plot, _pyplot, grad_flow_table

    rows = []
    for variant, q_share in (("baseline", 0.3), ("rope_frozen_qk", 0.0)):
        for seed in (0, 1):
            for step in (10, 20, 30):
                v = 0.5 + 0.1 * seed
                for layer, share in (("blocks.0.attn.q_proj", q_share), ("blocks.0.attn.v_proj", 1 - q_share - 0.1),
                                     ("head", 0.1)):
                    rows.append(dict(run_id=f"{variant}-{seed}", variant=variant, seed=seed, step=step,
                                     metric=f"health/grad_share/{layer}", value=share * v / v))
    curves = pd.DataFrame(rows + [dict(run_id="baseline-0", variant="baseline", seed=0, step=10,
                                       metric="grad_norm", value=1.0)])
    table = grad_flow_table(curves, "rope_frozen_qk")                   # (layers, steps)
    assert list(table.index) == ["blocks.0.attn.q_proj", "blocks.0.attn.v_proj", "head"]
    assert list(table.columns) == [10, 20, 30]
    assert (table.loc["blocks.0.attn.q_proj"] == 0).all()
    np.testing.assert_allclose(grad_flow_table(curves, "baseline").loc["blocks.0.attn.v_proj"], 0.6)
    assert grad_flow_table(curves, "nobody").empty
    path = tmp_path / "grad_flow.png"
    _grad_flow_plot(_pyplot(), curves, ["baseline", "rope_frozen_qk"], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = tmp_path / "empty.png"
    _grad_flow_plot(_pyplot(), curves[curves["metric"] == "grad_norm"], ["baseline"], empty)
    assert empty.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"               # always written, says "no ... logged"


LONG = {"rope": [3.0, 3.1, 3.2, 3.05], "model.rope_impl=fault_no_qk_grad": [3.5, 3.6, 3.4, 3.55],
        "nope_with_a_very_long_variant_name_indeed": [3.3, 3.2, 3.4, 3.1],
        "lr=0.001 wd=0.1 warmup=100": [2.9, 3.0, 3.1, 3.0], "short": [3.0, None, 3.1, 3.2]}


@pytest.mark.slow
def test_no_text_overlaps_on_any_plot_with_long_variant_names(tmp_path, monkeypatch):
    """Every plot as saved: no two of its texts (tick labels, titles, axis labels, legend) overlap."""
    import pandas as pd

    from sweeper.report import plots
    from sweeper.report.plot_text import overlapping_text

    root = write_sweep(tmp_path / "s", LONG, baseline="rope")
    inp = analyze_sweep(root, DecisionOptions(n_resamples=200))
    layers = [f"blocks.{i}.attn.{p}_proj" for i in range(6) for p in "qkvo"]
    grads = pd.DataFrame([dict(run_id=f"{v}-{s}", variant=v, seed=s, step=step, metric=metric, value=value)
                          for v in LONG for s in (0, 1) for step in (10, 20, 30)
                          for metric, value in [("grad_norm", 1.0 + s)]
                          + [(f"health/grad_share/{layer}", 1 / len(layers)) for layer in layers]])
    curves = pd.concat([inp.curves, grads], ignore_index=True)
    settled = []
    real_settle = plots.settle

    def settle_and_check(fig):
        left = real_settle(fig)
        settled.append((fig.axes[0].get_title() or fig._suptitle.get_text(), overlapping_text(fig), left))
        return left

    monkeypatch.setattr(plots, "settle", settle_and_check)
    paths = write_plots(tmp_path / "plots", curves, inp.analysis)
    assert set(paths) == {"metric_curve", "final_metric", "paired_difference", "grad_norm", "grad_flow"}
    assert len(settled) == 5
    for title, clashes, left in settled:
        assert clashes == [] and left == [], (title, clashes)


@pytest.mark.slow
def test_overlapping_text_finds_colliding_labels_and_settle_separates_them():
    from sweeper.report.plot_text import overlapping_text, settle, wrap
    from sweeper.report.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4, 3))
    names = [f"variant_with_a_long_name_{i}" for i in range(5)]
    ax.set_xticks(range(5), names)
    clashes = overlapping_text(fig)
    assert ("axes 0 x tick 'variant_with_a_long_name_0'", "axes 0 x tick 'variant_with_a_long_name_1'") in clashes
    assert settle(fig) == [] and overlapping_text(fig) == []
    assert ax.get_xticklabels()[0].get_rotation() == 90
    plt.close(fig)
    assert wrap("model.rope_impl=fault_no_qk_grad", 18) == "model.rope_impl=\nfault_no_qk_grad"
    assert wrap("lr=0.001 wd=0.1 warmup=100", 18) == "lr=0.001 wd=0.1\nwarmup=100"
