"""Runs that are copies of one another (classes 1 and 2 of the checks across runs): bitwise equality is the
strongest evidence a sweep has, and it costs nothing.

    seeds_no_effect(ev)    # every seed of a variant gave the same run: the seed never reaches the code
    change_no_effect(ev)   # a variant gave the baseline's runs at every seed: its change never reached the code

"The same run": every result final (cost figures aside) and every logged curve equal, to float rounding. A
variant listed in experiment.controls is meant to equal the baseline and is never flagged by change_no_effect.
"""
from __future__ import annotations

import numpy as np

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import (
    RunCurves,
    close,
    finals_matrix,
    metric_column,
    result_columns,
    same_rows,
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
    ok = usable(ev).to_numpy()
    columns = result_columns(ev)
    matrix, curves, out = finals_matrix(ev, columns), None, []
    ids, seeds = ev.runs["run_id"].to_numpy(), ev.runs["seed"].to_numpy()
    metric = ev.runs[metric_column(ev)].to_numpy(dtype=float) if ok.any() else None
    for variant, where in ev.runs.groupby("variant", sort=False).indices.items():
        rows = [int(i) for i in where if ok[i]]
        if len(rows) < 2 or not close(metric[rows], np.full(len(rows), metric[rows[0]])) \
                or not same_rows(matrix, rows):
            continue
        curves = RunCurves(ev, ids[rows])
        if not all(curves.same(ids[rows[0]], ids[r]) for r in rows[1:]):
            continue
        if not curves.points(ids[rows[0]]) and len(rows) < MIN_SEEDS_WITHOUT_CURVES:
            continue
        out.append(Finding(
            "seeds_no_effect", (str(variant),),
            f"{len(rows)} seeds ({', '.join(str(seeds[r]) for r in rows)}) of {variant}: final "
            f"{ev.experiment.metric} {shown(metric[rows[0]])} in each, {len(columns)} final metric(s) and "
            f"{_curves_note(curves, ids[rows[0]])}",
            f"every seed of {variant} gave the same run: the seed never reaches the code (a constant seed, or a seed "
            f"argument parsed and never used); seed every random generator from the run's seed (the {{seed}} "
            f"argument, or run.seed_for(...) with the run API) and run the sweep again; no test is run on copies",
            Effect.INVALID, untested=True))
    return out


def _echoes(ev: SweepEvidence, variant: str, columns: list[str]) -> list[str]:
    """The result columns that are the variant's changed config keys echoed back (a script that prints its
    arguments with its metrics): they differ by construction, not by effect."""
    leaves = set()
    for change in ev.changes.get(variant, []):
        for name in (change.key, change.key.rsplit(".", 1)[-1]):
            leaves |= {name, name.replace("-", "_"), name.replace("_", "-")}
    return [c for c in columns if c.removeprefix("final_") not in leaves]


def change_no_effect(ev: SweepEvidence) -> list[Finding]:
    baseline = ev.experiment.baseline
    if not baseline:
        return []
    ok = usable(ev).to_numpy()
    ids, seeds = ev.runs["run_id"].to_numpy(), ev.runs["seed"].to_numpy()
    groups = ev.runs.groupby("variant", sort=False).indices
    base = {int(seeds[i]): int(i) for i in groups.get(baseline, []) if ok[i]}
    if not base:
        return []
    metric = ev.runs[metric_column(ev)].to_numpy(dtype=float)
    all_columns, curves, out = result_columns(ev), None, []
    for variant, where in groups.items():
        mine = [int(i) for i in where if ok[i]]
        if variant == baseline or variant in ev.experiment.controls or not mine:
            continue
        pairs = [(i, base[int(seeds[i])]) for i in mine if int(seeds[i]) in base]
        if len(pairs) < len(mine) or not close(metric[[i for i, _ in pairs]], metric[[j for _, j in pairs]]):
            continue
        columns = _echoes(ev, str(variant), all_columns)
        matrix = finals_matrix(ev, columns)
        if not all(same_rows(matrix, [i, j]) for i, j in pairs):
            continue
        curves = RunCurves(ev, [ids[k] for pair in pairs for k in pair])
        if not all(curves.same(ids[i], ids[j]) for i, j in pairs):
            continue
        if not curves.points(ids[pairs[0][0]]) and len(pairs) < 2:
            continue
        changed = what_changes(ev, str(variant))
        out.append(Finding(
            "change_no_effect", (str(variant),),
            f"{len(pairs)} of {len(mine)} seeds of {variant} equal {baseline}'s at the same seed ({len(columns)} final "
            f"metric(s), {_curves_note(curves, ids[pairs[0][0]])}); what {variant} changes: {changed}",
            f"{variant} gave the baseline's runs at every seed: its change never reached the code; check that the "
            f"script reads that key or flag (argparse's parse_known_args keeps a misspelt --flag aside silently, "
            f"and a key the code never reads changes nothing), or list {variant} in experiment.controls if it is "
            f"meant to equal the baseline",
            Effect.INVALID))
    return out
