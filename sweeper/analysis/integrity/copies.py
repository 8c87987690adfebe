"""Runs that are copies of one another (classes 1 and 2 of the checks across runs): bitwise equality is the
strongest evidence a sweep has, and it costs nothing.

    seeds_no_effect(ev)    # every seed of a variant gave the same run: the seed never reaches the code
    change_no_effect(ev)   # a variant gave the baseline's runs at every seed: its change never reached the code

"The same run": every result final (cost figures aside) and every logged curve equal, to float rounding. A
variant listed in experiment.controls is meant to equal the baseline and is never flagged by change_no_effect.
"""
from __future__ import annotations

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import (
    RunCurves,
    metric_column,
    result_columns,
    same_finals,
    shown,
    usable,
    what_changes,
)

MIN_SEEDS_WITHOUT_CURVES = 3      # finals alone (no curve logged): a coincidence of 2 seeds is not evidence enough


def _curves_note(curves: RunCurves, run_id: str) -> str:
    names = curves.names(run_id)
    return (f"{len(names)} logged metric(s) ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) equal at "
            f"every step" if names else "no curve logged")


def seeds_no_effect(ev: SweepEvidence) -> list[Finding]:
    ok = usable(ev)
    columns, curves, out = result_columns(ev), None, []
    for variant, rows in ev.runs[ok].groupby("variant", sort=False):
        if len(rows) < 2 or not same_finals(rows, columns):
            continue
        curves = curves or RunCurves(ev)
        ids = rows["run_id"].tolist()
        if not all(curves.same(ids[0], other) for other in ids[1:]):
            continue
        if not curves.points(ids[0]) and len(rows) < MIN_SEEDS_WITHOUT_CURVES:
            continue
        value = float(rows[metric_column(ev)].iloc[0])
        out.append(Finding(
            "seeds_no_effect", (str(variant),),
            f"{len(rows)} seeds ({', '.join(str(s) for s in rows['seed'])}) of {variant}: final {ev.experiment.metric} "
            f"{shown(value)} in each, {len(columns)} final metric(s) and {_curves_note(curves, ids[0])}",
            f"every seed of {variant} gave the same run: the seed never reaches the code (a constant seed, or a seed "
            f"argument parsed and never used); seed every random generator from the run's seed (the {{seed}} "
            f"argument, or run.seed_for(...) with the run API) and run the sweep again; no test is run on copies",
            Effect.INVALID, untested=True))
    return out


def change_no_effect(ev: SweepEvidence) -> list[Finding]:
    baseline = ev.experiment.baseline
    if not baseline:
        return []
    ok = usable(ev)
    rows = ev.runs[ok]
    base = {int(r.seed): i for i, r in zip(rows.index, rows.itertuples()) if r.variant == baseline}
    columns, curves, out = result_columns(ev), None, []
    for variant, mine in rows.groupby("variant", sort=False):
        if variant == baseline or variant in ev.experiment.controls or not len(mine):
            continue
        pairs = [(i, base[int(s)]) for i, s in zip(mine.index, mine["seed"]) if int(s) in base]
        if not pairs or len(pairs) < len(mine):
            continue
        if not all(same_finals(ev.runs.loc[[i, j]], columns) for i, j in pairs):
            continue
        curves = curves or RunCurves(ev)
        ids = [(ev.runs.at[i, "run_id"], ev.runs.at[j, "run_id"]) for i, j in pairs]
        if not all(curves.same(a, b) for a, b in ids):
            continue
        if not curves.points(ids[0][0]) and len(pairs) < 2:
            continue
        changed = what_changes(ev, str(variant))
        out.append(Finding(
            "change_no_effect", (str(variant),),
            f"{len(pairs)} of {len(mine)} seeds of {variant} equal {baseline}'s at the same seed ({len(columns)} final "
            f"metric(s), {_curves_note(curves, ids[0][0])}); what {variant} changes: {changed}",
            f"{variant} gave the baseline's runs at every seed: its change never reached the code; check that the "
            f"script reads that key or flag (argparse's parse_known_args keeps a misspelt --flag aside silently; "
            f"a key the code never reads changes nothing), or list {variant} in experiment.controls if it is meant "
            f"to equal the baseline",
            Effect.INVALID))
    return out
