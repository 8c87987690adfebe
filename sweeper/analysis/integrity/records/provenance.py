"""Code provenance across the runs of a sweep: runs on different commits, with different uncommitted changes (a
dirty tree and a clean one, or two different diffs), or with different script hashes ran different code; a
comparison spanning them gets the verdict `mixed code`. So do runs that recorded one project source file (a module
they imported, in or out of git: code_files) with different hashes; the files are named. Runs on one dirty tree
with one diff ran one code: quiet (the journal says "dirty"). Torch-free; reads the runs' recorded fingerprints
(sweeper.run.observed.provenance: code_commit, code_dirty, code_diff, script_sha256, code_files): a reused run's own.

    mixed_code(ev)            # [Finding("mixed_code", ...)] or []
    mixed_code_coverage(ev)   # Coverage: how many runs recorded their code, and their project files
"""
from __future__ import annotations

import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
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


def _file_hashes(rows: pd.DataFrame) -> list[dict]:
    """Each row's recorded project files ({path: hash}; {} when it recorded none)."""
    column = rows["fp_code_files"] if "fp_code_files" in rows else [None] * len(rows)
    return [v if isinstance(v, dict) else {} for v in column]


def conflicting_files(files: list[dict]) -> list[str]:
    """Project files that runs recorded with more than one hash (a file only some runs imported is no conflict)."""
    seen: dict[str, set] = {}
    for recorded in files:
        for path, sha in recorded.items():
            seen.setdefault(path, set()).add(sha)
    return sorted(path for path, shas in seen.items() if len(shas) > 1)


def _files_label(paths: list[str], limit: int = 3) -> str:
    return ", ".join(paths[:limit]) + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def mixed_code(ev: SweepEvidence) -> list[Finding]:
    """Runs on different code: every comparison spanning them gets `mixed code`."""
    known, idents, codes = _codes(ev)
    rows = ev.runs[usable(ev)]
    files = _file_hashes(rows)
    edited = conflicting_files(files)
    if len(codes) < 2 and not edited:
        return []
    baseline = ev.experiment.baseline
    variants = list(dict.fromkeys(rows["variant"]))
    arms = []
    for variant in variants:
        span = ((known["variant"] == variant) | (known["variant"] == baseline)).to_numpy()
        in_span = ((rows["variant"] == variant) | (rows["variant"] == baseline)).to_numpy()
        if len(set(idents[span])) > 1 or conflicting_files([f for f, keep in zip(files, in_span) if keep]):
            arms.append(variant)
    if baseline in arms:                                  # the baseline itself mixes code: every comparison does
        arms = [baseline] + [v for v in variants if v != baseline]
    parts = [f"{describe(c)}: {runs_label(known[(idents == c).to_numpy()])}" for c in codes] if len(codes) > 1 else []
    for path in edited[:3]:
        by_hash: dict[str, list[int]] = {}
        for i, recorded in enumerate(files):
            if path in recorded:
                by_hash.setdefault(str(recorded[path])[:8], []).append(i)
        parts.append(f"{path}: " + "; ".join(f"{sha} in {runs_label(rows.iloc[idx])}" for sha, idx in by_hash.items()))
    what = [name for i, name in enumerate(("commits", "dirty flags", "uncommitted changes", "script hashes"))
            if len({c[i] for c in codes}) > 1]
    differ = "; ".join(([f"{' and '.join(what)} differ"] if what else [])
                       + ([f"project files differ: {_files_label(edited)}"] if edited else []))
    message = (f"runs of this sweep ran different code ({differ}): a comparison spanning them "
               f"mixes a code change into the variant's change; run every run on one commit (a new sweeper.dir), "
               f"or silence mixed_code with the reason")
    return [Finding("mixed_code", tuple(arms), "; ".join(parts), message, Effect.MIXED_CODE)]


def mixed_code_coverage(ev: SweepEvidence) -> Coverage:
    """'mixed_code: 8 of 8 runs recorded their code (commit or script) and 8 their project files (12 files)'."""
    rows = ev.runs[usable(ev)]
    if not len(rows):
        return Coverage("mixed_code", "no finished run: not checked", False)
    known, _, _ = _codes(ev)
    files = _file_hashes(rows)
    with_files = sum(1 for f in files if f)
    paths = {p for f in files for p in f}
    if not len(known) and not with_files:
        return Coverage("mixed_code", f"{len(rows)} runs recorded no code (no commit, script or project files): "
                                      f"not checked", False)
    return Coverage("mixed_code", f"{len(known)} of {len(rows)} runs recorded their commit or script, {with_files} "
                                  f"their project files ({len(paths)} files)", True)
