"""Read a sweep directory (finished, partial or interrupted) into tidy pandas DataFrames. Reads files only.

    from sweeper.analysis.results import load_experiment, load_manifest, load_runs, load_curves
    manifest = load_manifest("sweeps/rope-1a2b")                  # read once; None without one
    exp, notes = load_experiment("sweeps/rope-1a2b", manifest)    # an Experiment (run.files.experiment), why defaults
    runs = load_runs("sweeps/rope-1a2b", manifest)                # one row per planned run; runs.attrs["damaged"]
    curves = load_curves("sweeps/rope-1a2b", runs)                # long: run_id, variant, seed, step, metric, value

`load_runs` columns: variant, seed, run_id, run_dir, status, error, failure_class, exit_code, steps, resume_step,
wall_time_s, health, health_failed (names of failing checks), config_hash, log_tail (the end of the log of a
failed run whose error says little, e.g. "exit status 1"), final_<name> for every final metric of the run's
summary and every cost figure it records (wall_time_s, peak_rss_mb, tokens_per_s ...: secondary metrics),
source_<name> where a zero-glue run's final <name> was read (file, column, row; the summary's metric_sources),
fp_<name> for every fingerprint key, used_<field> for what the run recorded having used (used_columns: config
keys read, generators drawn, examples/tokens/steps consumed, data sizes), problems (what could not be read, ""
when all is well); attrs["cost"]:
the names of the cost figures among the final_ columns.
status: the run's recorded status; a summary that says finished (or diverged) wins over a status that is
damaged, missing, running or interrupted (as RunDir.outcome, without repairing anything); MISSING when the run
was planned and has no files; UNKNOWN when nothing readable says how it stands, or when the summary of
an ended run is unreadable (its result is unknown: neither usable nor lost; `error` names the file). Failed
and diverged runs are rows like any other: nothing is dropped here. STALE: recorded running, but its process
(on this host) is gone (a killed sweeper); `error` says how to resume. resume_step: the newest checkpoint
step of a run that did not end (what a rerun resumes from), None when it starts over.
Every file is read through sweeper.run.files.rundir (health through sweeper.health.result). A damaged file never
raises here: its message (naming the file and the fix) goes into the run's `problems` and into
`runs.attrs["damaged"]` / `curves.attrs["damaged"]` (a truncated last metrics line is skipped, and named). A
damaged manifest raises UnreadableFile (nothing can be trusted without it). Without a manifest the runs are
discovered from runs/<variant>/seed_<k>/ and the experiment records no baseline.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.config.variants.config_diff import Declared, diff_configs
from sweeper.health.result import HealthReport
from sweeper.run.files.atomic import read_tail
from sweeper.run.files.experiment import Experiment
from sweeper.run.files.manifest import Manifest, RunEntry, read_manifest
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import KEEP, STALE, Status, stale_hint
from sweeper.run.files.usage import Usage
from sweeper.run.observed.envinfo import git_state

MISSING, UNKNOWN = "missing", "unknown"          # row states beyond a run's own status (see the docstring)
FIXED_COLUMNS = ["variant", "seed", "run_id", "run_dir", "status", "error", "failure_class", "exit_code", "steps",
                 "wall_time_s", "health", "health_failed", "diagnosis", "config_hash", "log_tail", "resume_step"]
USED_COUNTS = ("examples", "tokens", "steps", "train_size", "eval_size")


def used_columns(used: Usage) -> dict:
    """A summary's `used` block as row columns: used_<count> (numbers), used_config_read (a frozenset of dotted
    keys, absent when the run did not track them), used_generators_unused (streams handed out and never drawn
    from, comma-separated; absent when none was handed out)."""
    out = {f"used_{name}": getattr(used, name) for name in USED_COUNTS if getattr(used, name) is not None}
    if used.config_read is not None:
        out["used_config_read"] = frozenset(used.config_read)
    if used.generators:
        out["used_generators_unused"] = ",".join(sorted(s for s, drawn in used.generators.items() if not drawn))
    return out


CURVE_COLUMNS = ["run_id", "variant", "seed", "step", "metric", "value"]
TAIL_LINES = 6
# Errors that say a run failed but not why (the launchers' fallbacks): the report shows the log's tail with them.
_UNHELPFUL = re.compile(r"^(exit status -?\d+|killed by [\w ]+|exited 0 without calling run\.finish\(\)"
                        r"|.*\(exit status -?\d+\)|Slurm job \S+ ended \S+ before the run did.*)$")


def load_manifest(sweep_dir: str | Path) -> Manifest | None:
    """The sweep's manifest (None when there is none); UnreadableFile when it is damaged. A report reads it once,
    at its entry (analyze_sweep, analyze_pair), and passes it to every loader below."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"sweep dir {sweep_dir} does not exist: pass the folder holding the sweep's "
                                f"manifest and runs/")
    return read_manifest(sweep_dir)


# A sweep dir without a manifest (its plan's write was killed, or runs were copied by hand) recorded no experiment:
# the report assumes the built-in trainer's metric, lower is better, and no baseline, and says so in its notes
# (--metric, --higher-is-better and --baseline say otherwise). A manifest that lacks a metric assumes none
# (sweeper.run.files.manifest.NOT_RECORDED: the report asks for --metric).
ASSUMED_WITHOUT_MANIFEST = "val_loss"


def load_experiment(sweep_dir: str | Path, manifest: Manifest | None) -> tuple[Experiment, list[str]]:
    """The manifest's experiment, and notes on what was assumed (without a manifest: no baseline, val_loss)."""
    if manifest is not None:
        return manifest.experiment, []
    variants = list(dict.fromkeys(e.variant for e in _planned_runs(Path(sweep_dir), None)))
    return (Experiment(name=Path(sweep_dir).name, baseline="", metric=ASSUMED_WITHOUT_MANIFEST, lower_is_better=True,
                       variants={v: [] for v in variants}),
            [f"{sweep_dir} has no manifest: runs found under runs/<variant>/seed_<k>/; decision metric "
             f"{ASSUMED_WITHOUT_MANIFEST}, lower is better (--metric and --higher-is-better say otherwise)"])


_SEED_DIR = re.compile(r"seed_(-?\d+)$")


def _planned_runs(sweep_dir: Path, manifest: Manifest | None) -> list[RunEntry]:
    """The manifest's runs, or the run dirs on disk when there is no manifest."""
    if manifest is not None:
        return list(manifest.runs)
    found = []
    for d in sorted((sweep_dir / "runs").glob("*/seed_*")):
        m = _SEED_DIR.search(d.name)
        if d.is_dir() and m:
            rel = d.relative_to(sweep_dir).as_posix()
            found.append(RunEntry(run_id=rel, variant=d.parent.name, seed=int(m.group(1)), run_dir=rel))
    return found


def _number(value) -> float:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        return math.nan


def unhelpful(error: str | None) -> bool:
    """True when a failed run's error does not say why (its log's tail is shown with it)."""
    return not (error or "").strip() or bool(_UNHELPFUL.match(error.strip()))


def log_tail_lines(rd: RunDir, n: int = TAIL_LINES) -> str:
    """The last n lines of the run's log, without sweeper's own start banners."""
    text = read_tail(rd.log_path, 8192)
    lines = text.splitlines()
    if len(text.encode()) >= 8192:
        lines = lines[1:]                                # the first line may be cut
    lines = [ln.rstrip() for ln in lines if ln.strip() and not ln.startswith("=== sweeper: start")]
    return "\n".join(lines[-n:])


def _run_row(sweep_dir: Path, entry: RunEntry) -> tuple[dict, list[str]]:
    """The row of one planned run, and the messages of its damaged files."""
    rd = RunDir(sweep_dir / entry.run_dir)
    row = dict(variant=entry.variant, seed=entry.seed, run_id=entry.run_id, run_dir=entry.run_dir,
               config_hash=entry.config_hash, status=MISSING, error=None, failure_class=None, exit_code=None,
               steps=math.nan, wall_time_s=math.nan, health=None, health_failed="", diagnosis=None, log_tail="",
               resume_step=None)
    damaged, problems = [], []
    try:
        record = rd.read_status() if rd.status_path.exists() else None
    except UnreadableFile as e:
        record, row["status"] = None, UNKNOWN
        damaged.append(str(e))
    if record is not None:
        row.update(status=record.status.value, error=record.error, failure_class=record.failure_class,
                   exit_code=record.exit_code)
        if record.status is Status.RUNNING and rd.liveness(record) == STALE:   # nothing runs it any more
            row.update(status=STALE, error=stale_hint(sweep_dir))
    try:
        summary = rd.read_summary()
    except UnreadableFile as e:
        summary = None
        damaged.append(str(e))
        if row["status"] in KEEP or row["status"] == MISSING:   # its result cannot be read: neither usable nor lost
            row.update(status=UNKNOWN, error=f"unreadable summary: {e}")
    if summary is not None:
        if summary.status in KEEP and row["status"] not in KEEP:      # it ended; the status was not updated
            row.update(status=summary.status.value, error=None)
        elif row["status"] in (MISSING, UNKNOWN):
            row["status"] = summary.status.value
        row["steps"], row["wall_time_s"] = _number(summary.steps), _number(summary.wall_time_s)
        cost = summary.extra.get("cost") if isinstance(summary.extra.get("cost"), dict) else {}
        for key, value in {**cost, **summary.final}.items():     # cost figures (machine-dependent) too
            row[f"final_{key}"] = _number(value)
        sources = summary.extra.get("metric_sources")
        for key, where in (sources.items() if isinstance(sources, dict) else ()):   # a zero-glue run's record
            if key in summary.final and isinstance(where, str):
                row[f"source_{key}"] = where
        row["_cost"] = [k for k in cost if k not in summary.final]
        for key, value in summary.fingerprint.items():
            if value is None or isinstance(value, (str, int, float, bool)) or key == "code_files":  # files: a dict
                row[f"fp_{key}"] = value
        row.update(used_columns(summary.used))
        if row["config_hash"] is None:
            row["config_hash"] = summary.config_hash
    elif row["status"] in KEEP and not damaged:          # its result is gone: unknown, neither usable nor lost
        why = (f"{rd.summary_path}: the run {row['status']}, but this file is missing: its result is unknown "
               f"(not counted); the same command runs it again")
        row.update(status=UNKNOWN, error=why)
        damaged.append(why)
    if rd.health_path.exists():
        try:
            health = HealthReport.read(rd.health_path)
            row["health"] = health.verdict
            row["health_failed"] = ",".join(invalidating(health))
            row["diagnosis"] = (health.diagnosis or {}).get("name")
        except (ValueError, OSError) as e:
            damaged.append(str(e))
    if row["status"] == MISSING and rd.metrics_path.exists():
        row["status"] = UNKNOWN
        problems.append(f"{rd.path}: metrics logged but no status recorded")
    if row["status"] not in KEEP and row["status"] != MISSING:
        row["resume_step"] = rd.checkpoint_step()                # where a rerun resumes (None: from the start)
    if row["status"] == Status.FAILED and unhelpful(row["error"]):
        row["log_tail"] = log_tail_lines(rd)
    row["problems"] = "; ".join(damaged + problems)
    return row, damaged


def invalidating(health: HealthReport) -> list[str]:
    """What makes a run's numbers untrustworthy: its failed checks, and its whole-run diagnosis when that names
    a bug (health.json `diagnosis.invalidates`, e.g. labels_do_not_match_inputs) its checks only warned about."""
    names = [c.name for c in health.failures]
    d = health.diagnosis or {}
    if d.get("invalidates") and d.get("name") and d.get("check") not in names:
        names.append(str(d["name"]))
    return names


def load_runs(sweep_dir: str | Path, manifest: Manifest | None) -> pd.DataFrame:
    """One row per planned run (see the module docstring for the columns), ordered by variant then seed; the
    runs `manifest` plans (load_manifest), or those on disk without one. attrs["damaged"]: one message per
    damaged file (named, with the fix)."""
    sweep_dir = Path(sweep_dir)
    rows, damaged, cost = [], [], {}
    for entry in _planned_runs(sweep_dir, manifest):
        row, bad = _run_row(sweep_dir, entry)
        cost.update(dict.fromkeys(row.pop("_cost", ())))
        rows.append(row)
        damaged += bad
    extra = sorted({c for r in rows for c in r} - set(FIXED_COLUMNS) - {"problems"})
    finals = [c for c in extra if c.startswith("final_")]
    others = [c for c in extra if not c.startswith("final_")]
    df = pd.DataFrame(rows, columns=FIXED_COLUMNS + finals + others + ["problems"])
    if len(df):
        df["seed"] = df["seed"].astype(int)
        order = list(manifest.experiment.variants) if manifest is not None else []
        order += [v for v in dict.fromkeys(df["variant"]) if v not in order]
        df["_rank"] = df["variant"].map({v: i for i, v in enumerate(order)})
        df = df.sort_values(["_rank", "seed"], kind="stable").drop(columns="_rank").reset_index(drop=True)
    df.attrs["damaged"] = damaged
    df.attrs["cost"] = list(cost)          # final_<key> columns that are cost figures, not results
    return df


def load_curves(sweep_dir: str | Path, runs: pd.DataFrame) -> pd.DataFrame:
    """Long table of every logged metric: run_id, variant, seed, step, metric, value (absent or null: no row).

    `runs` is load_runs'; a run whose metrics have truncated or corrupt lines gets them named in its
    `problems` there. attrs["problems"] and attrs["damaged"]: those messages. A (run, metric, step) logged more than
    once keeps its last value; attrs["overwritten"]: the earlier ones, (run_id, variant, seed, step, metric, value)
    tuples (a command's final line that repeats the last step beside the evaluation logged there: selected_final).
    """
    sweep_dir = Path(sweep_dir)
    records: list = []
    owners: list[np.ndarray] = []
    problems: list[str] = []
    for i, rel in enumerate(runs["run_dir"] if len(runs) else []):
        rd = RunDir(sweep_dir / rel)
        recs, bad = rd.read_metrics()
        if bad:
            why = f"{rd.metrics_path}: {bad} truncated or corrupt line(s) skipped"
            problems.append(why)
            old = runs.at[runs.index[i], "problems"]
            runs.at[runs.index[i], "problems"] = f"{old}; {why}" if old else why
        records.extend(recs)
        owners.append(np.full(len(recs), i))
    if not records:
        out = pd.DataFrame(columns=CURVE_COLUMNS)
        out.attrs.update(problems=problems, damaged=list(problems))
        return out
    wide = pd.DataFrame.from_records(records)
    owner = np.concatenate(owners)
    step = pd.to_numeric(wide.pop("step"), errors="coerce").to_numpy()
    blocks = []
    for name in wide.columns:
        value = pd.to_numeric(wide[name], errors="coerce").to_numpy(dtype=float)
        logged = wide[name].notna().to_numpy()          # absent key (e.g. val_loss off eval steps): no row
        if not logged.any() or np.isnan(value[logged]).all() and wide[name].dtype == object:
            continue                                    # non-numeric field such as a message string
        blocks.append((owner[logged], step[logged], name, value[logged]))
    if not blocks:
        out = pd.DataFrame(columns=CURVE_COLUMNS)
        out.attrs.update(problems=problems, damaged=list(problems))
        return out
    out = pd.DataFrame({
        "run_id": np.concatenate([runs["run_id"].to_numpy()[o] for o, _, _, _ in blocks]),
        "variant": np.concatenate([runs["variant"].to_numpy()[o] for o, _, _, _ in blocks]),
        "seed": np.concatenate([runs["seed"].to_numpy()[o] for o, _, _, _ in blocks]),
        "step": np.concatenate([s for _, s, _, _ in blocks]).astype(np.int64),
        "metric": np.concatenate([np.full(len(v), n, dtype=object) for _, _, n, v in blocks]),
        "value": np.concatenate([v for _, _, _, v in blocks]),
    })
    again = out.duplicated(["run_id", "metric", "step"], keep="last")    # a resumed run may repeat steps
    overwritten = tuple(out[again].itertuples(index=False, name=None)) if again.any() else ()
    out = out[~again].sort_values(["run_id", "metric", "step"], kind="stable").reset_index(drop=True)
    out.attrs.update(problems=problems, damaged=list(problems), overwritten=overwritten)
    return out


def load_variant_changes(sweep_dir: str | Path, manifest: Manifest | None,
                         baseline: str) -> tuple[dict[str, list], list[str]]:
    """Per variant, its config_diff.Change list against `baseline`, from the runs' frozen config.yaml (each
    variant's first readable one), and problems (an unreadable config is named, its variant left out). The
    manifest's declared changes group the keys (sweeper.config.variants.ablation recorded them at plan time)."""
    sweep_dir = Path(sweep_dir)
    configs, problems = {}, []
    for entry in _planned_runs(sweep_dir, manifest):
        if entry.variant in configs:
            continue
        try:
            configs[entry.variant] = RunDir(sweep_dir / entry.run_dir).read_config()
        except UnreadableFile as e:
            problems.append(f"what {entry.variant} changes: {e}")
    if not baseline or baseline not in configs:
        return {}, problems
    return {v: diff_configs(configs[baseline], c) for v, c in configs.items() if v != baseline}, problems


def declared_changes(manifest: Manifest | None) -> dict[str, list]:
    """The manifest's declared changes per variant ([config_diff.Declared]); {} without a manifest."""
    return {v: [Declared.from_dict(c) for c in cs] for v, cs in manifest.changes.items()} if manifest else {}


def load_code_state(sweep_dir: str | Path, manifest: Manifest | None) -> dict:
    """The code the runs ran: {commit, dirty} from their env records (a mix lists every commit); without any,
    the git state of the task's folder now (source: 'now'); `unreadable` names damaged env records."""
    sweep_dir = Path(sweep_dir)
    commits, dirty, unreadable = [], False, []
    for entry in _planned_runs(sweep_dir, manifest):
        try:
            git = RunDir(sweep_dir / entry.run_dir).read_env().get("git") or {}
        except UnreadableFile as e:
            unreadable.append(str(e))
            continue
        if git.get("commit") and git["commit"] not in commits:
            commits.append(git["commit"])
        dirty = dirty or bool(git.get("dirty"))
    if commits:
        return {"commit": ", ".join(commits), "dirty": dirty, "source": "runs", "unreadable": unreadable}
    cwd = (manifest.task or {}).get("cwd") if manifest else None
    return {**git_state(cwd if cwd and Path(cwd).is_dir() else None), "source": "now", "unreadable": unreadable}
