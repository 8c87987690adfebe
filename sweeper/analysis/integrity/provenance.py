"""Code provenance across the runs of a sweep: runs on different commits, with different uncommitted changes (a
dirty tree and a clean one, or two different diffs), or with different script hashes ran different code; a
comparison spanning them gets the verdict `mixed code`. Runs on one dirty tree with one diff ran one code: quiet
(the journal says "dirty"). Torch-free; reads the runs' recorded fingerprints (sweeper.run.provenance:
code_commit, code_dirty, code_diff, script_sha256).

    mixed_code(ev)        # [Finding("mixed_code", ...)] or []
"""
from __future__ import annotations

import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import usable
from sweeper.config.seeds import format_seeds

KEYS = ("code_commit", "code_dirty", "code_diff", "script_sha256")


def runs_label(rows: pd.DataFrame, limit: int = 4) -> str:
    """'relu seeds 0-1, wide seed 3' for messages (variants in their order, at most `limit` of them)."""
    parts = []
    for variant, group in rows.groupby("variant", sort=False):
        seeds = sorted(int(s) for s in group["seed"])
        parts.append(f"{variant} seed{'s' if len(seeds) > 1 else ''} {format_seeds(seeds)}")
    return ", ".join(parts[:limit]) + (f", +{len(parts) - limit} more" if len(parts) > limit else "")


def describe(ident: tuple) -> str:
    commit, dirty, diff, script = ident
    where = f"commit {commit[:12]}" if commit else "no git commit"
    return where + ((f" (dirty: diff {diff[:8]})" if diff else " (dirty)") if dirty else "") + \
        (f", script {script[:12]}" if script else "")


def _codes(ev: SweepEvidence) -> tuple[pd.DataFrame, pd.Series, list[tuple]]:
    """(finished runs that recorded their code, their identities, the distinct identities in order)."""
    rows = ev.runs[usable(ev)]
    if not len(rows) or not any(f"fp_{k}" in rows for k in KEYS):
        return rows.iloc[0:0], pd.Series(dtype=object), []
    columns = [rows[f"fp_{k}"] if f"fp_{k}" in rows else [None] * len(rows) for k in KEYS]
    idents = [tuple(None if v is None or v != v else v for v in values) for values in zip(*columns)]
    idents = pd.Series([None if all(v is None for v in i) else i for i in idents], index=rows.index, dtype=object)
    known = idents.notna().to_numpy()
    return rows[known], idents[known], list(dict.fromkeys(idents[known]))


def mixed_code(ev: SweepEvidence) -> list[Finding]:
    """Runs on different code: every comparison spanning them gets `mixed code`."""
    known, idents, codes = _codes(ev)
    if len(codes) < 2:
        return []
    evidence = "; ".join(f"{describe(c)}: {runs_label(known[(idents == c).to_numpy()])}" for c in codes)
    what = [name for i, name in enumerate(("commits", "dirty flags", "uncommitted changes", "script hashes"))
            if len({c[i] for c in codes}) > 1]
    baseline = ev.experiment.baseline
    variants = list(dict.fromkeys(known["variant"]))
    arms = []
    for variant in variants:
        span = idents[((known["variant"] == variant) | (known["variant"] == baseline)).to_numpy()]
        if len(set(span)) > 1:
            arms.append(variant)
    if baseline in arms:                                  # the baseline itself mixes code: every comparison does
        arms = [baseline] + [v for v in variants if v != baseline]
    message = (f"runs of this sweep ran different code ({' and '.join(what)} differ): a comparison spanning them "
               f"mixes a code change into the variant's change; run every run on one commit (a new sweeper.dir), "
               f"or silence mixed_code with the reason")
    return [Finding("mixed_code", tuple(arms), evidence, message, Effect.MIXED_CODE)]
