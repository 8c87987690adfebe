"""Evaluation identity: the arms of a comparison must be evaluated on the same data. Two kinds of evidence:
each run's evaluation fingerprint (sweeper.run.observed.evaluation: the run API's run.eval_fingerprint(...), or the
`eval_fingerprint` JSON key a task.command prints) compared across arms at each seed, and the variant's config
changes that touch evaluation keys (a val/eval/test/valid name, directly or through a group swap); and each run's
evaluation size (used.eval_size: run.eval_fingerprint(data) records len(data), a script reports `eval_size`; where
a run recorded none, a whole number it reported under an evaluation-size name: `eval_examples`, `n_val`,
`num_test_samples`, `holdout_size`; not a cumulative count such as `eval_examples_seen` or `val_batches`),
compared across arms at each seed, whatever the config keys are named. Torch-free.

    evaluation_identity(ev), evaluation_varies_with_seed(ev)     # the two checks (their findings' names)
    evaluation_keys(changes)       # the Change's of a variant that touch the evaluation (the changes table marks them)

Effects: an arm evaluated on other data than the baseline (other fingerprints at the same seeds, or a changed
evaluation key) -> `not comparable`; an arm whose fingerprint varies across its seeds while each seed matches
the baseline's (a per-seed validation split) -> a warning.
"""
from __future__ import annotations

import re

import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import arm_rows, usable
from sweeper.config.variants.config_diff import Change
from sweeper.run.observed.evaluation import EVAL_KEY

EVAL_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluation", "evaluate", "test", "dev", "holdout",
                        "heldout"})
NOT_DATA = frozenset({"interval", "every", "freq", "frequency", "period", "log", "print", "patience"})
_WORD = re.compile(r"[A-Za-z]+")
SIZE = "used_eval_size"          # load_runs' column of the summary's used.eval_size
# A reported final named like the evaluation's size: an evaluation word and a count word, no word of a running
# total or of another unit (batches, steps, evaluations done).
COUNT_WORDS = frozenset({"examples", "example", "samples", "sample", "size", "n", "num", "items", "rows",
                         "instances", "sequences", "images", "points", "len", "length"})
NOT_SIZE = frozenset({"seen", "total", "processed", "consumed", "cumulative", "so", "far", "batches", "batch",
                      "steps", "step", "evals", "calls", "runs", "interval", "every", "freq", "per", "time", "ms",
                      "sec", "seconds", "correct", "wrong", "errors", "mistakes", "hits"})


def is_evaluation_key(key: str) -> bool:
    """`data.val_size`, `eval.n_examples`, `test_split`: a key naming the evaluation (not when it is run:
    `eval_interval`, `val_every` are scheduling)."""
    words = [w.lower() for w in _WORD.findall(key)]
    return any(w in EVAL_WORDS for w in words) and not any(w in NOT_DATA for w in words)


def evaluation_keys(changes: list[Change]) -> list[Change]:
    return [c for c in changes if is_evaluation_key(c.key)]


def _prints_by_arm(ev: SweepEvidence) -> dict[str, dict[int, str]]:
    """variant -> seed -> the run's evaluation fingerprint (finished runs that recorded one)."""
    rows = ev.runs[usable(ev)]
    column = f"fp_{EVAL_KEY}"
    out: dict[str, dict[int, str]] = {}
    if column not in rows:
        return out
    for variant, seed, value in zip(rows["variant"], rows["seed"], rows[column]):
        if value is not None and value == value:        # NaN: the run recorded none
            out.setdefault(variant, {})[int(seed)] = str(value)
    return out


def evaluation_varies_with_seed(ev: SweepEvidence) -> list[Finding]:
    """Arms whose evaluation fingerprint differs across seeds, each seed matching the baseline's (a warning)."""
    baseline = ev.experiment.baseline
    prints = _prints_by_arm(ev)
    out = []
    for variant, seeds in prints.items():
        if len(set(seeds.values())) > 1 and (variant == baseline or not baseline
                                             or _matches(seeds, prints.get(baseline, {}))):
            out.append(Finding(
                "evaluation_varies_with_seed", (variant,),
                f"{variant}: {len(set(seeds.values()))} evaluation fingerprints over {len(seeds)} seeds",
                f"{variant} is evaluated on different data at each seed (a validation split drawn from the "
                f"seed?): the seed spread includes the choice of evaluation data; fix the split to compare "
                f"models on one evaluation set", Effect.WARN))
    return out


def evaluation_identity(ev: SweepEvidence) -> list[Finding]:
    """Arms evaluated on other data than the baseline: other fingerprints, or a changed evaluation key."""
    baseline = ev.experiment.baseline
    prints = _prints_by_arm(ev) if baseline else {}
    sizes_all = _size_column(ev) if baseline and len(ev.runs) else None
    out = []
    for variant in ev.experiment.variants:
        if variant == baseline or not baseline:
            continue
        reasons = []
        keys = evaluation_keys(ev.changes.get(variant, []))
        if keys:
            reasons.append("changes " + ", ".join(str(c) for c in keys[:4]) + (f" (+{len(keys) - 4})" if len(keys) > 4
                                                                                else ""))
        mine, base = prints.get(variant, {}), prints.get(baseline, {})
        if mine and base and not _matches(mine, base):
            common = sorted(set(mine) & set(base))
            differ = [s for s in common if mine[s] != base[s]]
            seen = (f"at seed{'s' if len(differ) > 1 else ''} {', '.join(map(str, differ[:6]))}" if differ
                    else "(no seed in common)")
            reasons.append(f"evaluation fingerprint {_one(mine)} vs {baseline}'s {_one(base)} {seen}")
        sizes = _size_differs(ev, variant, baseline, sizes_all)
        if sizes:
            reasons.append(sizes)
        if reasons:
            out.append(Finding(
                "evaluation_identity", (variant,), "; ".join(reasons),
                f"{variant} is not evaluated on the same data as {baseline}: the difference mixes the evaluation "
                f"change into the variant's; keep the evaluation set fixed across arms (or silence "
                f"evaluation_identity with the reason)", Effect.NOT_COMPARABLE))
    return out


def is_size_name(name: str) -> bool:
    """`eval_examples`, `n_val`, `numTestSamples`, `holdout_size`: the evaluation's size; `eval_examples_seen`,
    `val_batches`, `test_correct`, `eval_interval`: not."""
    ws = {w.lower() for w in _WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", name))}
    return bool(ws & EVAL_WORDS) and bool(ws & COUNT_WORDS) and not ws & (NOT_SIZE | NOT_DATA)


def _size_column(ev: SweepEvidence) -> pd.Series:
    """Per run: its evaluation size, as used.eval_size recorded it, else a whole number it reported under an
    evaluation-size name (is_size_name; the first such column); NaN where neither."""
    out = pd.to_numeric(ev.runs[SIZE], errors="coerce") if SIZE in ev.runs else pd.Series(float("nan"),
                                                                                          index=ev.runs.index)
    metric = f"final_{ev.experiment.metric}"
    for column in sorted(c for c in ev.runs.columns if c.startswith("final_") and c != metric
                         and is_size_name(c.removeprefix("final_"))):
        values = pd.to_numeric(ev.runs[column], errors="coerce")
        whole = values.where((values >= 0) & (values == values.round()))
        out = out.fillna(whole)
    return out


def _sizes_by_arm(ev: SweepEvidence, variant: str, sizes: pd.Series | None = None) -> dict[int, int]:
    """seed -> the number of evaluation examples the variant's usable runs recorded (_size_column)."""
    sizes = _size_column(ev) if sizes is None else sizes
    rows = arm_rows(ev).get(str(variant), [])
    return {int(s): int(v) for s, v in zip(ev.runs["seed"].iloc[rows], sizes.iloc[rows]) if v == v}


def _size_differs(ev: SweepEvidence, variant: str, baseline: str, sizes: pd.Series | None = None) -> str | None:
    """The evaluation sizes of the two arms at the seeds both recorded, when they differ."""
    mine, base = _sizes_by_arm(ev, variant, sizes), _sizes_by_arm(ev, baseline, sizes)
    common = sorted(set(mine) & set(base)) or None
    if common is None:
        if not mine or not base or set(mine.values()) == set(base.values()):
            return None
        return f"evaluated on {_counts(mine)} examples vs {baseline}'s {_counts(base)}"
    differ = [s for s in common if mine[s] != base[s]]
    if not differ:
        return None
    s = differ[0]
    return (f"evaluated on {mine[s]} examples vs {baseline}'s {base[s]} at seed{'s' if len(differ) > 1 else ''} "
            f"{', '.join(map(str, differ[:6]))}")


def _counts(sizes: dict[int, int]) -> str:
    return "/".join(str(v) for v in sorted(set(sizes.values())))


def evaluation_identity_coverage(ev: SweepEvidence) -> Coverage:
    ok = usable(ev)
    n = int(ok.sum())
    prints = int(ev.runs.loc[ok, f"fp_{EVAL_KEY}"].notna().sum()) if f"fp_{EVAL_KEY}" in ev.runs else 0
    sizes = int(_size_column(ev)[ok].notna().sum()) if len(ev.runs) else 0
    if not prints and not sizes:
        return Coverage("evaluation_identity", f"{n} runs recorded no fingerprint and no size: evaluation keys in "
                                               f"the changes only, the data not checked", False)
    return Coverage("evaluation_identity", f"{prints} of {n} runs recorded an evaluation fingerprint, {sizes} an "
                                           f"evaluation size", True)


def evaluation_varies_with_seed_coverage(ev: SweepEvidence) -> Coverage:
    ok = usable(ev)
    n = int(ok.sum())
    prints = int(ev.runs.loc[ok, f"fp_{EVAL_KEY}"].notna().sum()) if f"fp_{EVAL_KEY}" in ev.runs else 0
    if not prints:
        return Coverage("evaluation_varies_with_seed", f"{n} runs recorded no evaluation fingerprint: not checked",
                        False)
    return Coverage("evaluation_varies_with_seed", f"{prints} of {n} runs recorded an evaluation fingerprint", True)


def _matches(mine: dict[int, str], base: dict[int, str]) -> bool:
    """Same fingerprint at every seed both have; without a seed in common, the same set of fingerprints."""
    common = set(mine) & set(base)
    if common:
        return all(mine[s] == base[s] for s in common)
    return set(mine.values()) == set(base.values())


def _one(prints: dict[int, str]) -> str:
    values = list(dict.fromkeys(prints.values()))
    return values[0][:12] if len(values) == 1 else f"{len(values)} fingerprints"
