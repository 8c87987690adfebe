"""A debug subset or a `limit` left on the training data (`train_subset`, a warning): every arm then trains on a
sliver of its data, and the decision is about that sliver. Evidence, either: a key of the runs' config that
limits the training data and is set (`data.limit: 200`, `debug: true`, `max_train_samples: 512`,
`train_fraction: 0.05`; not under an eval/val/test key); such a flag in task.command (`--limit 100`). A count
limit in examples is weighed against the runs' compute ledger (used.examples): a limit at or above every example
a run consumed cut nothing the run had time to see (`limit: 2000` on runs that drew 1,280 examples): quiet. A
recorded training-set size smaller than the evaluation is no evidence (few-shot and small-data studies do that on
purpose), so it is not used. Torch-free.

    train_subset(ev)             # [Finding] for the sweep (arms named when only some have it)
    train_subset_coverage(ev)    # what evidence it had (COVERAGE)
    limiting(key, value)         # whether a config key and value restrict the training data
"""
from __future__ import annotations

import math
import re

import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence, memo
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.records.usage import task_block
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir

# Keys made to cut the training data down (not its size: n_train, num_samples declare a dataset, they limit nothing).
COUNT = re.compile(r"^(limit|limit_train|train_limit|subset|subset_size|train_subset|max_train_(samples|examples|size)|"
                   r"train_(samples|examples|size)_limit|debug_(samples|examples|size|subset)|limit_train_batches|"
                   r"overfit_batches|nrows|max_rows|row_limit|limit_rows|max_(samples|examples|items|records)|"
                   r"(samples|examples|items|records)_limit)$")
# A share of the data kept: `train_fraction`, `data.sample_frac`, `subsample_ratio`, `subset_pct` (a noun of the
# data before it, or the key alone: `fraction`; `dropout_frac`, `mask_ratio` name no data and stay quiet).
FRACTION = re.compile(r"^((train|training|data|dataset|sample|subsample|subset|keep|use)_)*"
                      r"(fraction|frac|subsample|percent|pct|ratio|portion|share)$")
_LONE_RATIO = re.compile(r"^(ratio|share|portion)$")      # too vague alone: a ratio of the data only under `data.`
_DATA = re.compile(r"^(data|dataset|train|training|train_data)$")
# Switches that swap in a debug-sized dataset: `debug`, `fast_dev_run`, `--smoke-test`, `sanity_check`, `tiny`.
FLAG = re.compile(r"^(debug|debug_mode|debug_data|fast_dev_run|smoke|smoke_test|smoketest|smoke_run|quick|quick_test|"
                  r"quick_run|dry_run_data|sanity|sanity_check|tiny|tiny_data|mini|mini_data|toy|dev_run|"
                  r"fast_run|subset_data|use_subset)$")
NOT_TRAIN = re.compile(r"(^|_)(eval|evaluation|val|valid|validation|test|dev|holdout|log|logging|print|ckpt|"
                       r"checkpoint|save|plot|grad|gradient|clip|memory|threads|workers|retries|time|timeout)(_|$)")
_ARG = re.compile(r"^--?([A-Za-z][\w.-]*)(?:=(.*))?$")


def limiting(key: str, value) -> bool:
    """`data.limit`=200, `debug`=True, `train_fraction`=0.1: True; null, false, 0, -1, 1.0, `eval.limit`: False."""
    parts = [p.lower().replace("-", "_") for p in key.split(".")]
    if any(NOT_TRAIN.search(p) for p in parts[:-1]):
        return False
    name = parts[-1]
    if FLAG.match(name):                   # before the eval/test words: `smoke_test` is a switch, not a test set
        return value is True or str(value).lower() in ("true", "1", "yes")
    if NOT_TRAIN.search(name) or (_LONE_RATIO.match(name) and not (len(parts) > 1 and _DATA.match(parts[-2]))):
        return False
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    if FRACTION.match(name):
        return 0 < value < (100 if "percent" in name or "pct" in name else 1)
    if name == "limit_train_batches" and isinstance(value, float):     # Lightning: 1.0 is all of it
        return 0 < value < 1
    return bool(COUNT.match(name)) and value > 0


def _flat(config, prefix: str = "") -> dict:
    if not isinstance(config, dict):
        return {prefix.rstrip("."): config} if prefix else {}
    out = {}
    for k, v in config.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _room(rows) -> float:
    """The most training examples a run of `rows` consumed (its compute ledger, used.examples): a limit at or
    above it cut nothing the run had time to see; inf when no run recorded a ledger. (used.train_size is the
    size of what the run drew from, after any limit: no measure of what the limit cut.)"""
    values = pd.to_numeric(rows["used_examples"], errors="coerce").dropna() if "used_examples" in rows else ()
    return float(max(values)) if len(values) else math.inf


def _bites(key: str, value, room: float) -> bool:
    """A limiting key that can have cut something: a count limit in examples below the room the runs had."""
    name = key.split(".")[-1].lower().replace("-", "_")
    if not COUNT.match(name) or "batches" in name or isinstance(value, bool):
        return True
    return float(value) < room


def _config_keys(ev: SweepEvidence) -> dict[str, list[str]]:
    """variant -> the limiting keys of one of its runs' config ("data.limit=200") that can have cut something
    (read once per evidence: the check and its coverage line share it)."""
    return memo(ev, _read_config_keys)


def _read_config_keys(ev: SweepEvidence) -> dict[str, list[str]]:
    out = {}
    for variant, rows in ev.runs.groupby("variant", sort=False):
        room = _room(rows)
        for run_dir in rows["run_dir"]:
            try:
                config = RunDir(ev.sweep_dir / str(run_dir)).read_config()
            except (UnreadableFile, OSError):
                continue
            out[str(variant)] = [f"{k}={v}" for k, v in _flat(config).items() if limiting(k, v) and _bites(k, v, room)]
            break
    return out


def _command_flags(task: dict, room: float = math.inf) -> list[str]:
    words, out = [str(w) for w in task.get("command") or []], []
    for i, word in enumerate(words):
        m = _ARG.match(word)
        if not m:
            continue
        value = m.group(2) if m.group(2) is not None else (words[i + 1] if i + 1 < len(words) else "true")
        if value.startswith("-") and not value.lstrip("-").replace(".", "").isdigit():
            value = "true"
        try:
            parsed = float(value) if value.lower() not in ("true", "false") else value.lower() == "true"
        except ValueError:
            continue
        if isinstance(parsed, float) and parsed.is_integer() and "." not in value:
            parsed = int(parsed)
        if limiting(m.group(1), parsed) and _bites(m.group(1), parsed, room):
            alone = m.group(2) is not None or i + 1 == len(words) or words[i + 1] != value   # a bare switch
            out.append(word if alone else f"{word} {value}")
    return out


def train_subset(ev: SweepEvidence) -> list[Finding]:
    if not len(ev.runs):
        return []
    keys = _config_keys(ev)
    flagged = {v: ks for v, ks in keys.items() if ks}
    flags = _command_flags(task_block(ev), _room(ev.runs))
    if not flagged and not flags:
        return []
    parts = []
    if flagged:
        values = list(dict.fromkeys(k for ks in flagged.values() for k in ks))
        arms = "every arm" if len(flagged) == len(keys) else ", ".join(flagged)
        parts.append(f"config {', '.join(values[:4])} in {arms}")
    if flags:
        parts.append(f"task.command passes {', '.join(flags[:3])}")
    room = _room(ev.runs)
    if room < math.inf:
        parts.append(f"runs consumed up to {int(room)} training examples")
    arms_named = tuple(flagged) if flagged and len(flagged) < len(keys) and not flags else ()
    return [Finding(
        "train_subset", arms_named, "; ".join(parts),
        "a debug subset or limit is left on the training data: the runs train on a sliver of it and the decision "
        "is about that sliver; remove the limit (null / false) for the real sweep, or silence train_subset with "
        "the reason (a deliberate small-data study)", Effect.WARN)]


def train_subset_coverage(ev: SweepEvidence) -> Coverage:
    read = len(_config_keys(ev)) if len(ev.runs) else 0
    if not read:
        return Coverage("train_subset", "no run config could be read: task.command flags only", False)
    return Coverage("train_subset", f"the config of {read} variant(s) and task.command read for keys and flags "
                                    f"that limit the training data (a subset cut inside the script: not seen)", True)
