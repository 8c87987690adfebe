"""PNG plots of a sweep (matplotlib, Agg backend; imported only when plots are asked for).

    from sweeper.report.plots import write_plots
    paths = write_plots(sweep_dir / "plots", curves, analysis)   # {"metric_curve": Path, "final_metric": ...}

metric_curve.png: the decision metric (as logged during training) against step, mean across seeds per variant
with a +-1 sd band.
final_metric.png: the decision metric of every seed (dots), the mean with its bootstrap CI (bar), lost seeds
counted in the axis label. paired_difference.png: per comparison, each seed's variant-minus-baseline
difference (seeds usable in both arms), with the decision interval of the verdict beside it and zero marked.
grad_norm.png: gradient norm against step (log scale), geometric mean with a
x/÷ geometric-sd band per variant (a band that stays positive).
grad_flow.png: gradient flow per parameter group per variant: a heatmap of each layer's share of the squared
gradient norm (the health/grad_share/LAYER metrics the live monitor logs) over steps, mean across seeds, log
colour scale; a layer that gets exactly no gradient (rope_frozen_qk's q/k projections) is drawn black.
grad_norm.png and grad_flow.png are written only when the runs logged what they draw (grad_norm, the monitor's
health/grad_share/*); the other plots are always written, and one without data yet says so. File names are fixed
(never made of variant names, which may hold '=', '/' or spaces); variant names only appear as labels,
wrapped (sweeper.report.plot_text.wrap), and no two pieces of text of a plot overlap (plot_text.settle before
every save; checked with long variant names in tests/test_plots.py and in the browser in tests/test_report_html.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.report.plot_text import settle, wrap

LABEL_CHARS = 18          # a variant's tick label is wrapped at this many characters per line
PLOTS = {"metric_curve": "metric_curve.png", "final_metric": "final_metric.png",
         "paired_difference": "paired_difference.png", "grad_norm": "grad_norm.png", "grad_flow": "grad_flow.png"}
GRAD_SHARE = "health/grad_share/"


def _label(text: str) -> str:
    return str(text).replace("$", r"\$")       # a '$' in a variant name is not matplotlib mathtext


def _pyplot():
    import matplotlib  # deferred: matplotlib (about 0.5 s), only when this runs

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # deferred: matplotlib (about 0.5 s), only when this runs

    return plt


def _arm_width(labels: list[str]) -> float:
    """Inches per x position so that wrapped tick labels (8 pt) sit side by side."""
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    return max(1.3, 0.075 * longest + 0.3)


def _title(ax, fig, text: str, ylabel: str | None = None) -> None:
    """A title wrapped to the figure's width (and a y label to its height)."""
    width, height = fig.get_size_inches()
    ax.set_title(wrap(text, int(width * 10)), fontsize=11)
    if ylabel is not None:
        ax.set_ylabel(wrap(ylabel, int(height * 11)))


def _save(fig, path: Path) -> Path:
    settle(fig)                    # no overlapping text: tick labels turned or smaller, titles wrapped
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
        tmp.replace(path)          # atomic: a reader never sees half a PNG
    except BaseException:
        tmp.unlink(missing_ok=True)    # a full disk leaves no half file behind
        _pyplot().close(fig)
        raise
    return path


PLOTTABLE = 1e150    # beyond, matplotlib's axis arithmetic overflows (1e308: "arange: cannot compute length")


def _divisor(*arrays) -> tuple[float, str]:
    """(power of ten to divide the drawn values by, the axis label's note): (1.0, "") unless a finite value is
    beyond PLOTTABLE, as a metric of 1e308 is; the figures in the report's text stay exact."""
    top = max((float(np.max(np.abs(x[np.isfinite(x)]))) for x in map(np.asarray, arrays)
               if x.size and np.isfinite(x).any()), default=0.0)
    if top <= PLOTTABLE:
        return 1.0, ""
    k = int(np.floor(np.log10(top)))
    return 10.0 ** k, f" (x 1e{k})"


def _curve_plot(plt, curves: pd.DataFrame, metric: str, variants: list[str], title: str, log: bool, path: Path):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    sub = curves[curves["metric"] == metric] if len(curves) else curves
    divide, note = (1.0, "") if log or not len(sub) else _divisor(sub["value"].to_numpy(dtype=float))
    drawn = 0
    for i, variant in enumerate(variants):
        rows = sub[sub["variant"] == variant]
        if rows.empty:
            continue
        table = rows.pivot_table(index="step", columns="run_id", values="value", aggfunc="last") / divide
        if log:                                  # geometric mean and sd: a band that stays positive
            table = np.log(table.where(table > 0))
        mean, sd = table.mean(axis=1), table.std(axis=1, ddof=1).fillna(0.0)
        low, mid, high = mean - sd, mean, mean + sd
        if log:
            low, mid, high = np.exp(low), np.exp(mid), np.exp(high)
        color = f"C{i % 10}"
        ax.plot(mid.index, mid.to_numpy(), color=color, label=_label(wrap(f"{variant} (n={table.shape[1]})", 28)))
        ax.fill_between(mid.index, low.to_numpy(), high.to_numpy(), color=color, alpha=0.2, lw=0)
        drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, f"no {metric} logged yet", ha="center", va="center", transform=ax.transAxes)
    else:                        # beside the axes: never over a curve, however long the names
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    if log and drawn:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    _title(ax, fig, title, _label(metric + note))
    ax.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def _final_plot(plt, analysis, path: Path):
    arms = list(analysis.arms.values())
    labels = [_label(wrap(a.variant, LABEL_CHARS) + f"\n{a.usable}/{a.planned} usable"
                     + (f"\n{a.lost} lost" if a.lost else "")) for a in arms]
    fig, ax = plt.subplots(figsize=(max(5, _arm_width(labels) * len(arms) + 1.5), 4.2))
    rng = np.random.default_rng(0)                        # fixed jitter: the same sweep gives the same picture
    divide, note = _divisor(*(a.values for a in arms))
    for i, arm in enumerate(arms):
        x = i + rng.uniform(-0.12, 0.12, arm.usable)
        ax.scatter(x, arm.values / divide, s=18, color=f"C{i % 10}", alpha=0.8, zorder=3)
        ci = arm.mean_ci
        ci = type(ci)(ci.estimate / divide, ci.low / divide, ci.high / divide, ci.method, ci.confidence,
                      ci.n_resamples, ci.seed)
        if np.isfinite(ci.low):
            ax.errorbar(i + 0.3, ci.estimate, yerr=[[ci.estimate - ci.low], [ci.high - ci.estimate]], fmt="o",
                        color="k", capsize=4, zorder=4)
        elif arm.usable:
            ax.plot(i + 0.3, ci.estimate, "o", color="k")
    ax.set_xticks(range(len(arms)), labels, fontsize=8)
    if not any(a.usable for a in arms):
        ax.text(0.5, 0.5, "no finished seeds yet", ha="center", va="center", transform=ax.transAxes)
    arrow = "lower is better" if analysis.lower_is_better else "higher is better"
    _title(ax, fig, _label(f"final {analysis.metric} per seed; black: mean, {analysis.confidence:.0%} bootstrap CI"),
           _label(f"final {analysis.metric} ({arrow}){note}"))
    ax.grid(alpha=0.3, axis="y")
    _save(fig, path)
    plt.close(fig)


def paired_differences(analysis, divide: float = 1.0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """comparison variant -> (seeds usable in both arms, variant - baseline per seed, each divided by `divide`
    first, so a difference beyond the largest float is drawn too): what the plot draws."""
    out = {}
    for c in analysis.comparisons:
        va, vb = analysis.arms[c.variant], analysis.arms[c.baseline]
        seeds = np.intersect1d(va.seeds, vb.seeds)                                      # (k,)
        a = va.values[np.searchsorted(va.seeds, seeds)]
        b = vb.values[np.searchsorted(vb.seeds, seeds)]
        out[c.variant] = (seeds, a / divide - b / divide)
    return out


def _paired_plot(plt, analysis, path: Path):
    divide, note = _divisor(*(a.values for a in analysis.arms.values()))
    diffs = paired_differences(analysis, divide)
    designs = {c.design for c in analysis.comparisons if c.design != "-"}
    labels = [_label(wrap(c.variant, LABEL_CHARS) + "\n- " + wrap(c.baseline, LABEL_CHARS) + f"\n{c.verdict}"
                     + (f"\n{c.design}" if len(designs) > 1 else "")) for c in analysis.comparisons]
    fig, ax = plt.subplots(figsize=(max(5, _arm_width(labels) * len(diffs) + 1.5), 4.2))
    ax.axhline(0.0, color="0.4", lw=1)
    for i, c in enumerate(analysis.comparisons):
        seeds, d = diffs[c.variant]
        ax.scatter(np.full(d.size, i) + np.linspace(-0.12, 0.12, max(d.size, 1))[:d.size], d, s=18,
                   color=f"C{(i + 1) % 10}", alpha=0.8, zorder=3)
        ci = getattr(c, "decision_ci", None) or c.delta
        if ci is not None and c.delta is not None:
            est = c.delta.estimate / divide if np.isfinite(c.delta.estimate) or not d.size else float(np.mean(d))
            low, high = (v / divide if np.isfinite(v) else (d.min() if v < 0 else d.max()) if d.size else 0.0
                         for v in (ci.low, ci.high))
            ax.errorbar(i + 0.3, est, yerr=[[max(0.0, est - low)], [max(0.0, high - est)]],
                        fmt="o", color="k", capsize=4, zorder=4)
    ax.set_xticks(range(len(analysis.comparisons)), labels, fontsize=8)
    if not analysis.comparisons or not any(diffs[c.variant][1].size for c in analysis.comparisons):
        ax.text(0.5, 0.5, "no seed usable in both arms yet", ha="center", va="center", transform=ax.transAxes)
    arrow = "below 0 is better" if analysis.lower_is_better else "above 0 is better"
    kind = ("paired differences per seed" if designs == {"paired"} else
            "differences per seed (same seed, not paired: the test compares the arms' means)"
            if designs == {"independent"} else "differences per seed (paired where the label says so)")
    _title(ax, fig, f"{kind}; black: difference with the decision interval",
           _label(f"{analysis.metric}: variant - baseline, per seed ({arrow}){note}"))
    ax.grid(alpha=0.3, axis="y")
    _save(fig, path)
    plt.close(fig)


def grad_flow_table(curves: pd.DataFrame, variant: str) -> pd.DataFrame:
    """(layers, steps) mean share of the squared gradient norm across the variant's seeds; layers in the order
    they were first logged (the model's order)."""
    if not len(curves):
        return pd.DataFrame()
    rows = curves[(curves["variant"] == variant) & curves["metric"].astype(str).str.startswith(GRAD_SHARE)]
    if rows.empty:
        return pd.DataFrame()
    layers = list(dict.fromkeys(rows["metric"].str[len(GRAD_SHARE):]))
    table = rows.assign(layer=rows["metric"].str[len(GRAD_SHARE):]).pivot_table(
        index="layer", columns="step", values="value", aggfunc="mean")           # (layers, steps)
    return table.reindex(layers)


def _grad_flow_plot(plt, curves: pd.DataFrame, variants: list[str], path: Path):
    tables = [(v, grad_flow_table(curves, v)) for v in variants]
    tables = [(v, t) for v, t in tables if not t.empty] or [(None, pd.DataFrame())]
    n_layers = max(len(t) for _, t in tables)
    fig, axes = plt.subplots(1, len(tables), figsize=(max(6, 4.5 * len(tables)), max(3, 0.22 * n_layers + 1.5)),
                             squeeze=False)
    import matplotlib.colors as mcolors  # deferred: matplotlib (about 0.5 s), only when this runs

    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("black")                      # exactly zero gradient (or not logged): a dead layer stands out
    image = None
    for ax, (variant, table) in zip(axes[0], tables):
        if table.empty:
            ax.text(0.5, 0.5, "no health/grad_share metrics logged (LiveMonitor per_layer)", ha="center",
                    va="center", transform=ax.transAxes)
            ax.set_axis_off()
            continue
        values = table.to_numpy(dtype=float)                                      # (layers, steps)
        masked = np.ma.masked_where(~(values > 0), values)
        image = ax.imshow(masked, aspect="auto", interpolation="nearest", cmap=cmap,
                          norm=mcolors.LogNorm(vmin=1e-6, vmax=1.0))
        steps = table.columns.to_numpy()
        ticks = np.unique(np.linspace(0, len(steps) - 1, min(6, len(steps))).astype(int))
        ax.set_xticks(ticks, [str(steps[i]) for i in ticks], fontsize=7)
        ax.set_yticks(range(len(table)), [_label(x) for x in table.index], fontsize=6)
        ax.set_xlabel("step")
        ax.set_title(_label(wrap(str(variant), 40)), fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), label="share of squared grad norm (black: zero)")
    fig.suptitle("gradient flow per layer (mean across seeds)")
    _save(fig, path)
    plt.close(fig)


def write_plots(out_dir: str | Path, curves: pd.DataFrame, analysis, metric: str | None = None,
                failed: list[tuple[Path, OSError]] | None = None) -> dict[str, Path]:
    """metric: the curve to draw in metric_curve.png (default: the analysis' decision metric); failed: each plot
    that could not be written (a full disk, a file-size limit) is appended as (path, error) and left out of the
    result while the others are still written (None: the first such error is raised)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plt = _pyplot()
    variants = list(analysis.arms)
    metric = metric or analysis.metric
    paths = {name: out_dir / file for name, file in PLOTS.items()}
    logged = set(curves["metric"].astype(str)) if len(curves) else set()
    wanted = {"grad_norm": "grad_norm" in logged, "grad_flow": any(m.startswith(GRAD_SHARE) for m in logged)}
    draws = {
        "metric_curve": lambda: _curve_plot(plt, curves, metric, variants,
                                            _label(f"{metric}: mean +- 1 sd across seeds"), False,
                                            paths["metric_curve"]),
        "final_metric": lambda: _final_plot(plt, analysis, paths["final_metric"]),
        "paired_difference": lambda: _paired_plot(plt, analysis, paths["paired_difference"]),
        "grad_norm": lambda: _curve_plot(plt, curves, "grad_norm", variants, "gradient norm: geometric mean x/÷ "
                                         "geometric sd across seeds", True, paths["grad_norm"]),
        "grad_flow": lambda: _grad_flow_plot(plt, curves, variants, paths["grad_flow"]),
    }
    for name, draw in draws.items():
        if not wanted.get(name, True):           # no monitor ran: no plot (an old one of another report goes)
            paths[name].unlink(missing_ok=True)
            del paths[name]
            continue
        try:
            draw()
        except OSError as e:
            if failed is None:
                raise
            stale = paths.pop(name)
            stale.unlink(missing_ok=True)        # never an older report's plot in its place
            failed.append((stale, e))
            continue
        if not paths[name].exists():             # nothing to draw (a plot with no data)
            del paths[name]
    return paths
