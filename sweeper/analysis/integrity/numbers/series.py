"""Series identity inside a run (check eval_is_train): an evaluation series (a name with val, valid, eval, test,
dev or holdout in it, or the decision metric itself, whatever its name: what the sweep is judged on is its
evaluation unless its name says training or objective) equal to a training series of the same run (any other
name) at every step they share, to float rounding, means the evaluation read the training data: the comparison
measures fit, not generalisation.

    eval_is_train(ev)      # [Finding] per (evaluation, training) pair of series equal in most runs of an arm

Evidence per run: at least MIN_SHARED shared steps with at least 2 distinct values, or a shared value off every
coarse grid (graph.fine); the run's finals count as one more shared point. A decision metric that is an
evaluation by being the decision metric only (`check_err`) needs the first kind (a final equal to the last point of
a training curve is the same number reported twice, not an evaluation). Series that select or smooth (best_,
min_, ema_, avg_ ...) are left out: a best-so-far is equal to its series while it improves. Effect: invalid when
the evaluation series is the decision metric, else a warning. Torch-free.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence, memo
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.graph import curve_index, fine
from sweeper.analysis.integrity.runs import ATOL, COST, RTOL, SEED, result_columns, usable
from sweeper.config.integrity import words

EVALUATION = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "dev", "holdout", "heldout"})
SELECTING = frozenset({"best", "min", "max", "ema", "avg", "average", "mean", "smooth", "smoothed", "running",
                       "final", "last", "prev", "previous", "lr", "step", "epoch"})
# A decision metric named like these (or like training) is the objective itself, not an evaluation of it.
OBJECTIVE = frozenset({"train", "training", "trn", "fit", "loss", "objective", "obj", "cost", "energy", "reward",
                       "return", "returns"})
MIN_SHARED = 3
FINAL = -1.0                   # the step the finals stand at


def kind(name: str, metric: str | None = None) -> str | None:
    """'eval', 'train' or None (a selecting series, a cost figure, a seed). With `metric` (the decision metric):
    that name is 'eval' unless its words say training or objective (check_err: eval; train_loss, loss: train)."""
    ws = set(words(name))
    if ws & SELECTING or COST.search(name) or SEED.search(name):
        return None
    if ws & EVALUATION or (name == metric and not ws & OBJECTIVE):
        return "eval"
    return "train"


def _points(ev: SweepEvidence) -> pd.DataFrame:
    """_series_points, once per evidence (the check and its coverage line share it)."""
    return memo(ev, _series_points)


def _series_points(ev: SweepEvidence) -> pd.DataFrame:
    """row (of ev.runs), step, metric (a name), value: the usable runs' curves of the series kind() names, with
    each final as a point at step FINAL. Integers, not strings, on the curve rows (graph.curve_index)."""
    ok = usable(ev).to_numpy()
    ci = curve_index(ev)
    metric = ev.experiment.metric
    wanted = [k for k, name in enumerate(ci.names) if kind(name, metric)]
    keep = (ci.row >= 0) & np.isin(ci.code, wanted)
    keep[keep] = ok[ci.row[keep]]
    _at_evaluations(keep, ci, [k for k in wanted if kind(ci.names[k], metric) == "eval"])
    names = np.array(ci.names + [""], dtype=object)
    parts = [pd.DataFrame({"row": ci.row[keep], "step": ci.step[keep], "metric": names[ci.code[keep]],
                           "value": ci.value[keep]})]
    rows = np.flatnonzero(ok)
    for col in result_columns(ev):
        if kind(col.removeprefix("final_"), metric):
            parts.append(pd.DataFrame({"row": rows, "step": FINAL, "metric": col.removeprefix("final_"),
                                       "value": pd.to_numeric(ev.runs[col], errors="coerce").to_numpy()[rows]}))
    out = pd.concat(parts, ignore_index=True)
    return out[out["value"].notna()]


def _at_evaluations(keep: np.ndarray, ci, evals: list[int]) -> None:
    """Keep a training series' point only at a (run, step) where an evaluation series has one (the only points a
    comparison reads): 100 training points per evaluation point cost 100x the merge. Whole-number steps only
    (else every point stays)."""
    is_eval = keep & np.isin(ci.code, evals)
    step = ci.step
    if not is_eval.any() or not np.all((step == np.floor(step)) & (np.abs(step) < 2 ** 31)):
        return
    key = ci.row.astype(np.int64) * np.int64(2 ** 32) + step.astype(np.int64)
    train = keep & ~is_eval
    keep[train] = np.isin(key[train], key[is_eval])


def _pairs(points: pd.DataFrame, metric: str | None) -> list[tuple[str, str]]:
    names = [str(n) for n in pd.unique(points["metric"])]
    kinds = {n: kind(n, metric) for n in names}
    return [(e, t) for e in names if kinds[e] == "eval" for t in names if kinds[t] == "train"]


def _identical_runs(by_metric: dict, e: str, t: str, weak_ok: bool = True) -> tuple[pd.Series, pd.Series]:
    """Per run (row) sharing steps of e and t: whether they are equal at every shared step (with enough
    evidence), and how many steps they share. weak_ok: one shared value off every coarse grid is enough."""
    m = by_metric[e].merge(by_metric[t], on=["row", "step"], suffixes=("_e", "_t"))
    if not len(m):
        return pd.Series(dtype=bool), pd.Series(dtype=int)
    x, y = m["value_e"].to_numpy(dtype=float), m["value_t"].to_numpy(dtype=float)
    m["same"] = np.isclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True)
    g = m.groupby("row", sort=False)
    same, shared = g["same"].all(), g.size()
    if not same.any():
        return same & False, shared
    distinct, last = g["value_e"].nunique(), g["value_e"].last()
    strong = (shared >= MIN_SHARED) & (distinct >= 2)
    weak = ~strong & same
    if weak_ok and weak.any():
        strong[weak] = fine(last[weak].to_numpy(dtype=float))
    return same & strong, shared


def eval_is_train(ev: SweepEvidence) -> list[Finding]:
    points = _points(ev)
    metric = ev.experiment.metric
    pairs = _pairs(points, metric) if len(points) else []
    if not pairs:
        return []
    by_metric = {name: frame[["row", "step", "value"]] for name, frame in points.groupby("metric", sort=False)}
    variants = ev.runs["variant"].astype(str).to_numpy()
    out = []
    for e, t in pairs:
        identical, shared = _identical_runs(by_metric, e, t, weak_ok=kind(e) == "eval")
        if not identical.any():
            continue
        arms = pd.DataFrame({"variant": variants[shared.index.to_numpy(dtype=int)], "hit": identical.to_numpy()})
        per = arms.groupby("variant", sort=False)["hit"].agg(["sum", "size"])
        hit = per[(per["sum"] >= 1) & (per["sum"] * 2 >= per["size"])]
        if not len(hit):
            continue
        counts = "; ".join(f"{v}: {int(r['sum'])} of {int(r['size'])} runs" for v, r in hit.iterrows())
        steps = int(shared[identical].median())
        out.append(Finding(
            "eval_is_train", tuple(str(v) for v in hit.index),
            f"{e} equals {t} at every shared step (median {steps} shared point(s), finals included) in {counts}",
            f"the evaluation series {e} is the training series {t} to float rounding: the evaluation read the "
            f"training data (a train loader passed to evaluate, a split that returns the training set); evaluate on "
            f"held-out data" + ("; the decision metric then measures fit, not generalisation" if e == metric else ""),
            Effect.INVALID if e == metric else Effect.WARN))
    return out


def eval_is_train_coverage(ev: SweepEvidence) -> Coverage:
    points = _points(ev)
    pairs = _pairs(points, ev.experiment.metric) if len(points) else []
    if not pairs:
        return Coverage("eval_is_train", "no run logged both an evaluation series and a training series: not "
                                         "checked", False)
    runs = points.loc[points["metric"].isin({n for p in pairs for n in p}), "row"].nunique()
    return Coverage("eval_is_train", f"{len(pairs)} (evaluation, training) series pair(s) compared in {runs} run(s)",
                    True)
