"""Read a sweep directory (finished, partial or interrupted) into tidy pandas DataFrames.

    from sweeper.results import load_experiment, load_runs, load_curves
    exp = load_experiment("sweeps/rope-1a2b")   # name, baseline, metric, lower_is_better, variants
    runs = load_runs("sweeps/rope-1a2b")        # one row per planned run
    curves = load_curves("sweeps/rope-1a2b")    # long: run_id, variant, seed, step, metric, value

`load_runs` columns: variant, seed, run_id, run_dir, status, error, exit_code, steps, wall_time_s, health,
health_failed (names of failing checks), config_hash, final_<name> for every key of summary.json "final",
fp_<name> for every fingerprint key, problems (what could not be read, "" when all is well).
Status is status.json's, else summary.json's, else "missing" (planned, never started); an unreadable status is
"unknown". Failed and diverged runs are rows like any other: nothing is dropped here.
Missing, truncated or corrupt files never raise: they are reported in `problems` (runs) or in
`curves.attrs["problems"]` (a truncated last metrics.jsonl line is skipped). Without sweep.json the runs are
discovered from runs/<variant>/seed_<k>/ and the experiment falls back to val_loss, lower is better.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

STATUSES = ("finished", "failed", "diverged", "interrupted", "running", "pending", "missing", "unknown")
FIXED_COLUMNS = ["variant", "seed", "run_id", "run_dir", "status", "error", "exit_code", "steps", "wall_time_s",
                 "health", "health_failed", "config_hash"]
CURVE_COLUMNS = ["run_id", "variant", "seed", "step", "metric", "value"]


@dataclass
class Experiment:
    name: str
    baseline: str
    metric: str = "val_loss"
    lower_is_better: bool = True
    variants: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)   # why defaults were used


def _read_json(path: Path) -> tuple[object, str]:
    """(parsed, "") or (None, why); never raises."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), ""
    except FileNotFoundError:
        return None, f"{path.name} missing"
    except (OSError, ValueError) as e:
        return None, f"{path.name} unreadable ({type(e).__name__})"


def load_manifest(sweep_dir: str | Path) -> tuple[dict | None, str]:
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise FileNotFoundError(f"sweep dir {sweep_dir} does not exist: pass the folder holding sweep.json and runs/")
    manifest, why = _read_json(sweep_dir / "sweep.json")
    if manifest is not None and not isinstance(manifest, dict):
        return None, "sweep.json is not a JSON object"
    return manifest, why


def _variant_names(value) -> list[str]:
    if isinstance(value, dict):
        return [str(k) for k in value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def load_experiment(sweep_dir: str | Path) -> Experiment:
    """The experiment block of sweep.json; defaults (with the reason in `problems`) where it is missing."""
    manifest, why = load_manifest(sweep_dir)
    exp = (manifest or {}).get("experiment") or {}
    problems = [] if manifest is not None else [f"{why}: experiment settings defaulted"]
    variants = _variant_names(exp.get("variants"))
    if not variants:
        variants = list(dict.fromkeys(r["variant"] for r in _planned_runs(Path(sweep_dir), manifest)))
    baseline = exp.get("baseline") or (variants[0] if variants else "")
    if not exp.get("baseline"):
        problems.append(f"no experiment.baseline in sweep.json: using the first variant {baseline!r}")
    metric = exp.get("metric") or "val_loss"
    if not exp.get("metric"):
        problems.append("no experiment.metric in sweep.json: using val_loss")
    lower = exp.get("lower_is_better")
    if not isinstance(lower, bool):
        problems.append("no experiment.lower_is_better in sweep.json: assuming lower is better")
        lower = True
    return Experiment(str(exp.get("name") or Path(sweep_dir).name), str(baseline), str(metric), lower, variants,
                      problems)


_SEED_DIR = re.compile(r"seed_(-?\d+)$")


def _planned_runs(sweep_dir: Path, manifest: dict | None) -> list[dict]:
    """Manifest runs, or the run dirs on disk when there is no usable manifest."""
    if manifest is not None and isinstance(manifest.get("runs"), list):
        out = []
        for r in manifest["runs"]:
            if isinstance(r, dict) and "variant" in r and "seed" in r:
                rel = r.get("run_dir") or f"runs/{r['variant']}/seed_{r['seed']}"
                out.append({"variant": str(r["variant"]), "seed": int(r["seed"]),
                            "run_id": str(r.get("run_id") or rel), "run_dir": str(rel),
                            "config_hash": r.get("config_hash")})
        return out
    found = []
    for d in sorted((sweep_dir / "runs").glob("*/seed_*")):
        m = _SEED_DIR.search(d.name)
        if d.is_dir() and m:
            rel = d.relative_to(sweep_dir).as_posix()
            found.append({"variant": d.parent.name, "seed": int(m.group(1)), "run_id": rel, "run_dir": rel,
                          "config_hash": None})
    return found


def _number(value) -> float:
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _run_row(sweep_dir: Path, planned: dict) -> dict:
    run_dir = sweep_dir / planned["run_dir"]
    row = dict(planned, status="missing", error=None, exit_code=None, steps=math.nan, wall_time_s=math.nan,
               health=None, health_failed="")
    problems = []
    status, why_status = _read_json(run_dir / "status.json")
    summary, why_summary = _read_json(run_dir / "summary.json")
    if isinstance(status, dict) and status.get("status") in STATUSES:
        row.update(status=status["status"], error=status.get("error"), exit_code=status.get("exit_code"))
    elif status is not None or "unreadable" in why_status:
        problems.append(why_status or "status.json has no valid status")
        row["status"] = "unknown"
    if isinstance(summary, dict):
        if row["status"] in ("missing", "unknown") and summary.get("status") in STATUSES:
            row["status"] = summary["status"]
        row["steps"] = _number(summary.get("steps"))
        row["wall_time_s"] = _number(summary.get("wall_time_s"))
        for key, value in (summary.get("final") or {}).items():
            row[f"final_{key}"] = _number(value)
        for key, value in (summary.get("fingerprint") or {}).items():
            if value is None or isinstance(value, (str, int, float, bool)):
                row[f"fp_{key}"] = value
    elif "unreadable" in why_summary or summary is not None:
        problems.append(why_summary or "summary.json is not a JSON object")
    elif row["status"] == "finished":
        problems.append("summary.json missing for a finished run")
    health, why_health = _read_json(run_dir / "health.json")
    if isinstance(health, dict):
        row["health"] = health.get("verdict")
        checks = health.get("checks") or []
        row["health_failed"] = ",".join(str(c.get("name")) for c in checks
                                        if isinstance(c, dict) and c.get("status") == "fail")
    elif "unreadable" in why_health:
        problems.append(why_health)
    if row["status"] == "missing" and run_dir.is_dir() and (run_dir / "metrics.jsonl").exists():
        row["status"] = "unknown"
        problems.append("metrics.jsonl present but no status.json")
    if row.get("config_hash") is None and isinstance(summary, dict):
        row["config_hash"] = (summary.get("fingerprint") or {}).get("config_hash")
    row["problems"] = "; ".join(problems)
    return row


def load_runs(sweep_dir: str | Path) -> pd.DataFrame:
    """One row per planned run (see the module docstring for the columns), ordered by variant then seed."""
    sweep_dir = Path(sweep_dir)
    manifest, _ = load_manifest(sweep_dir)
    rows = [_run_row(sweep_dir, p) for p in _planned_runs(sweep_dir, manifest)]
    extra = sorted({c for r in rows for c in r} - set(FIXED_COLUMNS) - {"problems"})
    finals = [c for c in extra if c.startswith("final_")]
    others = [c for c in extra if not c.startswith("final_")]
    df = pd.DataFrame(rows, columns=FIXED_COLUMNS + finals + others + ["problems"])
    if df.empty:
        return df
    df["seed"] = df["seed"].astype(int)
    order = _variant_names(((manifest or {}).get("experiment") or {}).get("variants"))
    order += [v for v in dict.fromkeys(df["variant"]) if v not in order]
    df["_rank"] = df["variant"].map({v: i for i, v in enumerate(order)})
    df = df.sort_values(["_rank", "seed"], kind="stable").drop(columns="_rank").reset_index(drop=True)
    return df


def _parse_jsonl(text: str) -> tuple[list, int]:
    """Records of a JSON-lines text and the number of lines skipped (truncated or corrupt)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        return json.loads("[" + ",".join(lines) + "]"), 0        # one C-level parse in the common case
    except ValueError:
        records, bad = [], 0
        for ln in lines:
            try:
                records.append(json.loads(ln))
            except ValueError:
                bad += 1
        return records, bad


def load_curves(sweep_dir: str | Path, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Long table of every logged metric: run_id, variant, seed, step, metric, value (absent or null: no row).

    `runs` (from load_runs) avoids reading the manifest twice. Problems go to `.attrs["problems"]`.
    """
    sweep_dir = Path(sweep_dir)
    runs = load_runs(sweep_dir) if runs is None else runs
    records: list = []
    owners: list[np.ndarray] = []
    problems: list[str] = []
    for i, rel in enumerate(runs["run_dir"] if len(runs) else []):
        path = sweep_dir / rel / "metrics.jsonl"
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        recs, bad = _parse_jsonl(text)
        recs = [r for r in recs if isinstance(r, dict) and isinstance(r.get("step"), (int, float))]
        if bad:
            problems.append(f"{rel}/metrics.jsonl: {bad} truncated or corrupt line(s) skipped")
        records.extend(recs)
        owners.append(np.full(len(recs), i))
    if not records:
        out = pd.DataFrame(columns=CURVE_COLUMNS)
        out.attrs["problems"] = problems
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
    out = pd.DataFrame({
        "run_id": np.concatenate([runs["run_id"].to_numpy()[o] for o, _, _, _ in blocks]),
        "variant": np.concatenate([runs["variant"].to_numpy()[o] for o, _, _, _ in blocks]),
        "seed": np.concatenate([runs["seed"].to_numpy()[o] for o, _, _, _ in blocks]),
        "step": np.concatenate([s for _, s, _, _ in blocks]).astype(np.int64),
        "metric": np.concatenate([np.full(len(v), n, dtype=object) for _, _, n, v in blocks]),
        "value": np.concatenate([v for _, _, _, v in blocks]),
    })
    out = out.drop_duplicates(["run_id", "metric", "step"], keep="last")   # a resumed run may repeat steps
    out = out.sort_values(["run_id", "metric", "step"], kind="stable").reset_index(drop=True)
    out.attrs["problems"] = problems
    return out
