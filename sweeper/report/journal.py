"""The experiment journal: one entry per sweep (hypothesis, commit, what each variant changed, seeds, verdict
with its interval, health, the report), for people (journal.md) and for tools (journal.jsonl).

    python -m sweeper.journal list [--experiment rope] [--variant nope] [--since 2026-12-01] [--until ...]
    python -m sweeper.journal search 'frozen qk'           # any text of an entry, case-insensitive
    python -m sweeper.journal show rope-815fcfd0           # an entry by sweep name, id or sweep dir
    python -m sweeper.journal conclude rope-815fcfd0 'RoPE helps; the frozen-qk kernel is broken'
    python -m sweeper.journal --journal ~/notes/journal list   # another journal dir (default: ./sweeps)

Every report of a sweep (the end of `python -m sweeper ...`, `python -m sweeper.report DIR`) records its entry
in the journal chosen by `sweeper.journal` (default: the folder holding the sweep dirs; `off`: none). The
sweep dir identifies an entry: reporting a sweep again updates its entry (numbers, seeds, verdicts) and keeps
its date and conclusion. This module is the one owner of both files: journal.jsonl is the record (one JSON
object per line), journal.md is rewritten from it on every change; both are written atomically under a lock,
so concurrent sweeps never lose an entry. A damaged line is named (file and line), never skipped.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from sweeper.config.seeds import format_seeds
from sweeper.config.variants.config_diff import describe
from sweeper.errors import UsageError, not_text
from sweeper.pasted import pasted
from sweeper.run.files.atomic import atomic_write_text
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.reading import UnreadableFile

RECORD, PAGE, LOCK = "journal.jsonl", "journal.md", ".journal.lock"


def journal_dir(sweep_dir: str | Path, setting: str | None) -> Path | None:
    """Where a sweep's entry goes: sweeper.journal (a dir; `off`: nowhere), default the sweep dir's parent."""
    if setting is not None and str(setting).strip().lower() in ("off", "false", "none", ""):
        return None
    return Path(os.path.expanduser(setting)) if setting else Path(sweep_dir).resolve().parent


def entry_id(sweep_dir: str | Path) -> str:
    return stable_hash(str(Path(sweep_dir).resolve()), 10)


# -- the record ---------------------------------------------------------------------------------------------------

def read_entries(folder: str | Path) -> list[dict]:
    """Every entry of a journal, oldest first ([] when there is none); UnreadableFile names a damaged line."""
    path = Path(folder) / RECORD
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise UnreadableFile(path, f"the journal cannot be read ({e.strerror or e})", "check its permissions") from None
    except UnicodeDecodeError as e:
        raise UnreadableFile(path, f"the journal is not UTF-8 text ({not_text(e)})",
                             "restore it from a backup, or move it aside (journal.md holds a readable copy)") from None
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise UnreadableFile(path, f"line {n} is not JSON ({e.msg})",
                                 f"fix or delete line {n} (journal.md holds a readable copy)") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise UnreadableFile(path, f"line {n} is not a journal entry (no id)", f"fix or delete line {n}")
        entries.append(entry)
    return entries


@contextmanager
def _locked(folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(folder: Path, entries: list[dict]) -> None:
    atomic_write_text(folder / RECORD, "".join(json.dumps(e, sort_keys=True, default=str) + "\n" for e in entries))
    atomic_write_text(folder / PAGE, render(entries))


def record(folder: str | Path, entry: dict) -> Path:
    """Add `entry`, or update the entry of the same sweep (its created date and conclusion are kept)."""
    folder = Path(folder)
    with _locked(folder):
        entries = read_entries(folder)
        old = next((e for e in entries if e["id"] == entry["id"]), None)
        if old is not None:
            entry = {**entry, "created": old.get("created", entry["created"]),
                     "conclusion": old.get("conclusion")}
            entries = [entry if e["id"] == entry["id"] else e for e in entries]
        else:
            entries.append(entry)
        _write(folder, entries)
    return folder / PAGE


def find(entries: list[dict], ref: str) -> dict:
    """The entry a reference names: its id, sweep name, or sweep dir (UsageError listing the choices)."""
    ref_path = str(Path(os.path.expanduser(ref)).resolve()) if ref else ""
    hits = [e for e in entries if ref in (e["id"], e.get("sweep")) or e.get("sweep_dir") == ref_path]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(e.get("sweep", e["id"]) for e in entries[-10:]) or "none yet"
    what = "matches several entries" if hits else "is not in the journal"
    raise UsageError(f"{ref!r} {what}: give a sweep name, entry id or sweep dir (recent: {known})")


def conclude(folder: str | Path, ref: str, text: str) -> dict:
    """Set an entry's human conclusion (replacing an earlier one)."""
    folder = Path(folder)
    if not text.strip():
        raise UsageError("the conclusion is empty: say what the sweep showed, e.g. 'RoPE helps by 0.38 nats'")
    with _locked(folder):
        entries = read_entries(folder)
        entry = find(entries, ref)
        entry["conclusion"], entry["concluded"] = text.strip(), _now()
        _write(folder, entries)
    return entry


def select(entries: list[dict], experiment: str | None = None, variant: str | None = None,
           since: str | None = None, until: str | None = None, text: str | None = None) -> list[dict]:
    """Entries matching every given filter; dates compare as YYYY-MM-DD prefixes of the entry's date."""
    out = []
    for e in entries:
        day = str(e.get("created", ""))[:10]
        if experiment and e.get("experiment") != experiment:
            continue
        if variant and variant not in [v.get("variant") for v in e.get("variants", [])]:
            continue
        if (since and day < since) or (until and day > until[:10]):
            continue
        if text and text.lower() not in json.dumps(e, default=str).lower():
            continue
        out.append(e)
    return out


# -- what an entry says -------------------------------------------------------------------------------------------

def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def entry_of(inp, sweep_dir: str | Path, code: dict, headline: str) -> dict:
    """A journal entry from a sweeper.report.ReportInput, the code state ({commit, dirty}) and the report's
    headline sentence."""
    an, exp = inp.analysis, inp.experiment
    by_variant = {c.variant: c for c in an.comparisons}
    notes = exp.notes if exp is not None else {}
    variants = []
    for arm in an.arms.values():
        c = by_variant.get(arm.variant)
        seeds = sorted(int(s) for s in inp.runs.loc[inp.runs["variant"] == arm.variant, "seed"])
        row = {"variant": arm.variant, "role": f"vs {c.baseline}" if c else "baseline", "seeds": seeds,
               "usable": arm.usable, "planned": arm.planned, "note": notes.get(arm.variant),
               "changes": describe(inp.changes[arm.variant], inp.declared.get(arm.variant, []))
               if arm.variant in inp.changes else None,
               "health": ", ".join(f"{k} {v}" for k, v in sorted(arm.health.items())),
               "health_failed": list(arm.health_failed), "mean": _num(arm.summary["mean"])}
        if c is not None:
            ci = c.decision_ci
            row.update(verdict=c.verdict, delta=_num(c.delta.estimate) if c.delta is not None else None,
                       ci_low=_num(ci.low) if ci is not None else None,
                       ci_high=_num(ci.high) if ci is not None else None,
                       ci_level=ci.confidence if ci is not None else None,
                       p_holm=_num(c.p_adjusted), reason=c.reason)
        variants.append(row)
    sweep_dir = Path(sweep_dir).resolve()
    return {"id": entry_id(sweep_dir), "sweep": sweep_dir.name, "sweep_dir": str(sweep_dir),
            "report": str(sweep_dir / "report.md"), "created": _now(), "updated": _now(),
            "experiment": exp.name if exp else "", "hypothesis": exp.hypothesis if exp else None,
            "metric": an.metric, "lower_is_better": exp.lower_is_better if exp else None,
            "baseline": exp.baseline if exp else "", "code": code, "variants": variants,
            "headline": headline, "conclusion": None}


def _num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if x != x else round(x, 6)


def render(entries: list[dict]) -> str:
    """journal.md: newest entry first."""
    md = ["# Experiment journal", "", f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}; newest first. "
          f"Written by sweeper from {RECORD} (edit conclusions with `python -m sweeper.journal conclude`).", ""]
    for e in reversed(entries):
        code = e.get("code") or {}
        commits = [c[:12] for c in (code.get("commit") or "unknown").split(", ")]     # every commit the runs ran
        commit = ", ".join(commits) + (" (mixed code)" if len(commits) > 1 else "") + \
            (" (dirty)" if code.get("dirty") else "")
        md += [f"## {str(e.get('created', ''))[:16]} {e.get('experiment', '')}: {e.get('sweep', '')}", "",
               f"- hypothesis: {e.get('hypothesis') or '(none stated: set experiment.hypothesis)'}",
               f"- code: {commit}; metric: {e.get('metric')} "
               f"({'lower' if e.get('lower_is_better', True) else 'higher'} is better); "
               f"report: [{e.get('report')}]({e.get('report')}); updated {e.get('updated')}", "",
               "| variant | what changed | seeds | verdict | Δ [CI] | health | note |", "|---|---|---|---|---|---|---|"]
        for v in e.get("variants", []):
            delta = "" if v.get("delta") is None else (
                f"{v['delta']:+.4g} [{_g(v.get('ci_low'))}, {_g(v.get('ci_high'))}]")
            md.append(
                f"| {v['variant']} | "
                f"{_cell(v.get('changes') or ('(baseline)' if v.get('role') == 'baseline' else ''))} | "
                f"{_seeds(v.get('seeds', []))} ({v.get('usable')}/{v.get('planned')} usable) | "
                f"{v.get('verdict', v.get('role', ''))} | {delta} | {_cell(v.get('health', ''))} | "
                f"{_cell(v.get('note') or '')} |"
            )
        md += [
            "",
            f"**{e.get('headline', '')}**",
            "",
            f"Conclusion: {e['conclusion']}"
            if e.get("conclusion")
            else "Conclusion: (none yet: "
                 f"`{pasted('python', '-m', 'sweeper.journal', 'conclude', e.get('sweep'), '...')}`)",
            "",
        ]
    return "\n".join(md)


def _g(x) -> str:
    return "?" if x is None else f"{x:+.4g}"


def _seeds(seeds: list[int]) -> str:
    return format_seeds(seeds) if seeds else "none"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_line(e: dict) -> str:
    verdicts = ", ".join(f"{v['variant']} {v['verdict']}" for v in e.get("variants", []) if v.get("verdict"))
    return (
        f"{str(e.get('created', ''))[:16]}  {e.get('sweep', ''):<28} {e.get('experiment', ''):<14} "
        f"{verdicts or '(no comparison)'}" + (f"  | {e['conclusion']}" if e.get("conclusion") else "")
    )
