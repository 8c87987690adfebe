"""Runs that are copies of one another (classes 1 and 2 of the checks across runs), read off the run-equality graph
(graph.py: every usable run hashed on its whole record). The plan says which pairs must differ: two seeds of one
variant, and two variants at one seed (controls aside).

    seeds_no_effect(ev)    # seeds of a variant that gave the same run: every seed (invalid, no test on copies), or
                           # some ("seeds 0 and 2 gave the same run: 3 distinct runs from 4 seeds": the test counts
                           # each distinct run once)
    change_no_effect(ev)   # a variant equal to the baseline at every seed (invalid) or at some (warning), or two
                           # variants equal to each other at every seed (warning)

A variant listed in experiment.controls is meant to equal the baseline and is never flagged by change_no_effect.
Equal records that are not distinctive (finals on a coarse grid, no curve) count only in bulk: every one of at
least MIN_SEEDS_WITHOUT_CURVES seeds equal, or a variant equal to the baseline at every one of at least 2 seeds.
"""
from __future__ import annotations

import numpy as np

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.graph import RunGraph, run_graph
from sweeper.analysis.integrity.runs import RunCurves, metric_column, shown, usable, what_changes

MIN_SEEDS_WITHOUT_CURVES = 3      # coarse finals alone: a coincidence of 2 seeds is not evidence enough


def _curves_note(ev: SweepEvidence, run_id: str) -> str:
    names = RunCurves(ev, [run_id]).names(run_id)
    return (f"{len(names)} logged metric(s) ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) equal at "
            f"every step" if names else "no curve logged")


def _seeds(seeds: np.ndarray, rows: list[int]) -> str:
    names = [str(seeds[r]) for r in rows]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _arms(ev: SweepEvidence) -> dict[str, list[int]]:
    ok = usable(ev).to_numpy()
    return {str(v): [int(i) for i in where if ok[i]]
            for v, where in ev.runs.groupby("variant", sort=False).indices.items()}


def seeds_no_effect(ev: SweepEvidence) -> list[Finding]:
    g = run_graph(ev)
    ids, seeds = ev.runs["run_id"].to_numpy(), ev.runs["seed"].to_numpy()
    out = []
    for variant, rows in _arms(ev).items():
        if len(rows) < 2:
            continue
        classes = g.classes(rows)
        if len(classes) == 1 and (g.distinct[rows[0]] or len(rows) >= MIN_SEEDS_WITHOUT_CURVES):
            metric = float(ev.runs[metric_column(ev)].iloc[rows[0]])
            out.append(Finding(
                "seeds_no_effect", (variant,),
                f"{len(rows)} seeds ({', '.join(str(seeds[r]) for r in rows)}) of {variant}: final "
                f"{ev.experiment.metric} {shown(metric)} in each, {len(g.columns)} final metric(s) and "
                f"{_curves_note(ev, ids[rows[0]])}",
                f"every seed of {variant} gave the same run: the seed never reaches the code (a constant seed, or a "
                f"seed argument parsed and never used); seed every random generator from the run's seed (the "
                f"{{seed}} argument, or run.seed_for(...) with the run API) and run the sweep again; no test is run "
                f"on copies", Effect.INVALID, untested=True))
            continue
        same = [c for c in classes if len(c) > 1 and g.distinct[c[0]]]
        if not same:
            continue
        groups = "; ".join(f"seeds {_seeds(seeds, c)} gave the same run" for c in same)
        out.append(Finding(
            "seeds_no_effect", (variant,),
            f"{variant}: {groups} ({len(g.columns)} final metric(s), {_curves_note(ev, ids[same[0][0]])}): "
            f"{len(classes)} distinct runs from {len(rows)} seeds",
            f"the seed reaches {variant}'s code only in part (a seed folded into a few values, a generator seeded "
            f"apart from the run's seed): seed every random generator from the run's seed; the test counts each "
            f"distinct run once", Effect.WARN, copies=tuple(str(ids[r]) for c in same for r in c[1:])))
    return out


def _equal_at(g: RunGraph, mine: dict[int, int], theirs: dict[int, int]) -> tuple[list[int], list[int], bool]:
    """(common seeds, those where the two runs are one class, whether every equal pair is distinctive)."""
    common = sorted(set(mine) & set(theirs))
    equal = [s for s in common if g.cls[mine[s]] == g.cls[theirs[s]]]
    return common, equal, all(g.distinct[mine[s]] for s in equal)


def change_no_effect(ev: SweepEvidence) -> list[Finding]:
    baseline = ev.experiment.baseline
    arms = _arms(ev)
    if not baseline or not arms.get(baseline):
        return []
    g = run_graph(ev)
    ids, seeds = ev.runs["run_id"].to_numpy(), ev.runs["seed"].to_numpy()
    by_seed = {v: {int(seeds[r]): r for r in rows} for v, rows in arms.items()}
    tested = [v for v in arms if v != baseline and v not in ev.experiment.controls and by_seed[v]]
    out, like_baseline = [], set()
    for variant in tested:
        common, equal, distinct = _equal_at(g, by_seed[variant], by_seed[baseline])
        if not equal or not common:
            continue
        every = len(equal) == len(by_seed[variant]) == len(common)
        if every and not distinct and len(equal) < 2 or not every and not distinct:
            continue
        changed = what_changes(ev, variant)
        run = ids[by_seed[variant][equal[0]]]
        evidence = (f"{len(equal)} of {len(by_seed[variant])} seeds of {variant} equal {baseline}'s at the same seed"
                    + ("" if every else f" (seed{'s' if len(equal) > 1 else ''} {', '.join(map(str, equal))})")
                    + f" ({len(g.columns)} final metric(s), {_curves_note(ev, run)}); what {variant} changes: "
                    f"{changed}")
        if every:
            like_baseline.add(variant)
            out.append(Finding(
                "change_no_effect", (variant,), evidence,
                f"{variant} gave the baseline's runs at every seed: its change never reached the code; check that "
                f"the script reads that key or flag (argparse's parse_known_args keeps a misspelt --flag aside "
                f"silently, and a key the code never reads changes nothing), or list {variant} in "
                f"experiment.controls if it is meant to equal the baseline", Effect.INVALID))
        else:
            out.append(Finding(
                "change_no_effect", (variant,), evidence,
                f"{variant}'s change reached the code at only some seeds: at the others it gave the baseline's run "
                f"bitwise (a change applied on a branch that some seeds never take, a key read only sometimes); the "
                f"comparison measures the change diluted by those seeds", Effect.WARN))
    rest = [v for v in tested if v not in like_baseline]
    for i, a in enumerate(rest):
        for b in rest[i + 1:]:
            common, equal, distinct = _equal_at(g, by_seed[a], by_seed[b])
            if common and len(equal) == len(common) and (distinct or len(common) >= 2) \
                    and len(common) == len(by_seed[a]) == len(by_seed[b]):
                out.append(Finding(
                    "change_no_effect", (a, b),
                    f"{a} and {b} gave the same run at every one of {len(common)} seeds; what {a} changes: "
                    f"{what_changes(ev, a)}; what {b} changes: {what_changes(ev, b)}",
                    f"{a} and {b} differ in config but not in effect: what tells them apart never reached the "
                    f"code; check that the script reads the keys they set", Effect.WARN))
    return out


def seeds_no_effect_coverage(ev: SweepEvidence) -> Coverage:
    g = run_graph(ev)
    arms = {v: rows for v, rows in _arms(ev).items() if len(rows) >= 2}
    if not arms:
        return Coverage("seeds_no_effect", "no arm has 2 usable seeds: not checked", False)
    runs = sum(len(r) for r in arms.values())
    distinct = sum(len(g.classes(r)) for r in arms.values())
    weak = sum(int(not g.distinct[r]) for rows in arms.values() for r in rows)
    note = f"; {weak} run(s) with coarse finals and no curve: compared only in bulk" if weak else ""
    return Coverage("seeds_no_effect", f"{runs} usable runs of {len(arms)} arm(s) compared on {len(g.columns)} "
                                       f"final(s) and {int(g.curve_points.sum())} curve point(s): {distinct} distinct "
                                       f"runs{note}", True)


def change_no_effect_coverage(ev: SweepEvidence) -> Coverage:
    baseline = ev.experiment.baseline
    arms = _arms(ev)
    if not baseline or not arms.get(baseline):
        return Coverage("change_no_effect", "no usable baseline seed: not checked", False)
    seeds = ev.runs["seed"].to_numpy()
    base = {int(seeds[r]) for r in arms[baseline]}
    pairs = sum(len({int(seeds[r]) for r in rows} & base) for v, rows in arms.items()
                if v != baseline and v not in ev.experiment.controls)
    if not pairs:
        return Coverage("change_no_effect", "no variant shares a usable seed with the baseline: not checked", False)
    return Coverage("change_no_effect", f"{pairs} (variant, baseline) pair(s) at a shared seed compared on their "
                                        f"whole record", True)
