"""Code provenance across the runs of a sweep: runs on different commits, with different script hashes, or some
on a dirty tree and some not, ran different code; a comparison spanning them gets the verdict `mixed code`.
Every run on one dirty tree: the commit does not say what ran (a warning). Torch-free; reads the runs' recorded
fingerprints (sweeper.run.provenance: code_commit, code_dirty, script_sha256).

    findings = check_code(ev)       # [Finding("mixed_code", ...)] or [Finding("dirty_tree", ...)] or []
"""
from __future__ import annotations

import pandas as pd

from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.recorded import finished, runs_label, value

KEYS = ("code_commit", "code_dirty", "script_sha256")


def identity(row: pd.Series) -> tuple | None:
    """(commit, dirty, script hash) of a run; None when it recorded none of them (an older run)."""
    ident = tuple(value(row, k) for k in KEYS)
    return None if all(v is None for v in ident) else ident


def describe(ident: tuple) -> str:
    commit, dirty, script = ident
    where = f"commit {commit[:12]}" if commit else "no git commit"
    return where + (" (dirty)" if dirty else "") + (f", script {script[:12]}" if script else "")


def check_code(ev: SweepEvidence) -> list[Finding]:
    rows = finished(ev.runs)
    if not any(f"fp_{k}" in rows for k in KEYS):
        return []
    idents = rows.apply(identity, axis=1) if len(rows) else pd.Series(dtype=object)
    known = rows[idents.notna()]
    idents = idents[idents.notna()]
    codes = list(dict.fromkeys(idents))
    if len(codes) == 1:
        if codes[0][1]:
            return [Finding("dirty_tree", (), f"{len(known)} runs on {describe(codes[0])}",
                            "every run ran on uncommitted changes: the commit does not say what code ran; commit "
                            "before sweeping (the script hash is recorded either way)", Effect.WARN)]
        return []
    if len(codes) < 2:
        return []
    by_code = {c: known[(idents == c).to_numpy()] for c in codes}
    evidence = "; ".join(f"{describe(c)}: {runs_label(r)}" for c, r in by_code.items())
    what = [name for i, name in enumerate(("commits", "dirty flags", "script hashes"))
            if len({c[i] for c in codes}) > 1]
    baseline = ev.experiment.baseline
    arms = []
    for variant in dict.fromkeys(known["variant"]):
        span = idents[(known["variant"] == variant) | (known["variant"] == baseline)] if baseline else \
            idents[known["variant"] == variant]
        if len(set(span)) > 1:
            arms.append(variant)
    if baseline in arms:                                  # the baseline itself mixes code: every comparison does
        arms = [baseline] + [v for v in dict.fromkeys(known["variant"]) if v != baseline]
    message = (f"runs of this sweep ran different code ({' and '.join(what)} differ): a comparison spanning them "
               f"mixes a code change into the variant's change; run every run on one commit (a new sweeper.dir), "
               f"or silence mixed_code with the reason")
    return [Finding("mixed_code", tuple(arms), evidence, message, Effect.MIXED_CODE)]
