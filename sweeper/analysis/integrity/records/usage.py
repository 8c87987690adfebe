"""What the runs actually used, against what the sweep set (class 4 of the second round): a config key a variant or
the baseline sets that no run read never reached the code; a generator the run API handed out and no run drew
from gave the runs nothing, so no "paired by seed" claim rests on it. Reads the summaries' `used` blocks
(sweeper.run.usage, as load_runs' used_* columns). Torch-free.

    key_never_read(ev)       # [Finding] per variant with changed keys no run of either arm read
    generator_unused(ev)     # [Finding] per stream handed out as a generator and never drawn from (a warning)
    key_never_read_coverage(ev), generator_unused_coverage(ev)   # what evidence each had (COVERAGE)

A key counts as read when the run read it, a key below it, or a mapping above it whole (was_read). Keys a
task.command gets as arguments ({key} words, task.args, task.config_file) reach the script outside run.config:
they are not checked (the coverage line says how many).
"""
from __future__ import annotations

import re

import pandas as pd

from sweeper.analysis.integrity.coverage import Coverage
from sweeper.analysis.integrity.evidence import SweepEvidence
from sweeper.analysis.integrity.finding import Effect, Finding
from sweeper.analysis.integrity.runs import arm_values, usable
from sweeper.analysis.results import load_manifest
from sweeper.config.variants.config_diff import Change
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.usage import was_read

READ = "used_config_read"
UNUSED = "used_generators_unused"
_WORD = re.compile(r"\{([A-Za-z_][\w.]*)\}")


def task_block(ev: SweepEvidence) -> dict:
    """The manifest's task block (the evidence's, else read from the sweep dir; {} without one)."""
    if ev.task is not None:
        return ev.task
    try:
        manifest = load_manifest(ev.sweep_dir)
    except (OSError, UnreadableFile):      # no sweep dir (evidence built by hand), or its manifest is unreadable
        return {}
    return (manifest.task or {}) if manifest is not None else {}


def passed_as_arguments(task: dict, key: str) -> bool:
    """Whether a task.command hands `key` to the script outside run.config (argument words, flags, its YAML)."""
    if not task.get("command"):
        return False
    if task.get("config_file") or task.get("args") == "flags":
        return True
    args = task.get("args")
    named = set(args) if isinstance(args, list) else set()
    named |= {m for word in task.get("command") or [] for m in _WORD.findall(str(word))}
    return any(key == n or key.startswith(n + ".") or n.startswith(key + ".") for n in named)


def _reads(ev: SweepEvidence, variant: str) -> list | None:
    """The config_read sets of the variant's usable runs; None when any of them did not record one."""
    if READ not in ev.runs:
        return None
    values = list(arm_values(ev, READ, variant))
    if not values:
        return None
    return None if any(not isinstance(v, frozenset) for v in values) else values


def _unread(ev: SweepEvidence, variant: str, task: dict) -> tuple[list[Change], list[Change]] | None:
    """(checked keys, keys no run of variant or baseline read); None when either arm recorded no reads."""
    mine, base = _reads(ev, variant), _reads(ev, ev.experiment.baseline)
    if mine is None or base is None:
        return None
    checked = [c for c in ev.changes.get(variant) or [] if not passed_as_arguments(task, c.key)]
    return checked, [c for c in checked if not any(was_read(c.key, r) for r in mine + base)]


def key_never_read(ev: SweepEvidence) -> list[Finding]:
    baseline = ev.experiment.baseline
    if not baseline or not len(ev.runs):
        return []
    task, out = task_block(ev), []
    for variant in ev.experiment.variants:
        if variant == baseline:
            continue
        got = _unread(ev, variant, task)
        if got is None or not got[1]:
            continue
        checked, unread = got
        every = len(unread) == len(ev.changes.get(variant) or [])
        shown = ", ".join(str(c) for c in unread[:4]) + (f" (+{len(unread) - 4})" if len(unread) > 4 else "")
        out.append(Finding(
            "key_never_read", (variant,),
            f"{variant} sets {shown}; no run of {variant} or {baseline} read "
            f"{'it' if len(unread) == 1 else 'them'} from its config",
            f"the change never reached the code ({'nothing' if every else 'part'} of what {variant} claims to test "
            f"ran): fix the key's name (a typo, a key another config overwrites, a script reading another name), "
            f"or read it in the script (run.config)",
            Effect.INVALID if every else Effect.WARN))
    return out


def key_never_read_coverage(ev: SweepEvidence) -> Coverage:
    ok = usable(ev)
    n = int(ok.sum())
    tracked = int(ev.runs.loc[ok, READ].map(lambda v: isinstance(v, frozenset)).sum()) if READ in ev.runs else 0
    if not tracked:
        return Coverage("key_never_read", f"{n} runs recorded no config keys read (a task.command without "
                                          f"sweeper.init()): not checked", False)
    task = task_block(ev)
    keys = [c.key for v, cs in ev.changes.items() if v != ev.experiment.baseline for c in cs]
    args = sum(passed_as_arguments(task, k) for k in keys)
    note = f"; {args} of {len(keys)} changed keys passed as arguments: not checked" if args else ""
    return Coverage("key_never_read", f"{tracked} of {n} runs recorded the config keys they read{note}",
                    tracked == n and args < len(keys))


def generator_unused(ev: SweepEvidence) -> list[Finding]:
    if UNUSED not in ev.runs or not len(ev.runs):
        return []
    rows = ev.runs[ev.runs["status"] == "finished"]
    per: dict[str, list[str]] = {}
    for variant, value in zip(rows["variant"], rows[UNUSED]):
        for stream in str(value).split(",") if isinstance(value, str) and value else ():
            per.setdefault(stream, []).append(str(variant))
    out = []
    for stream, variants in per.items():
        arms = list(dict.fromkeys(variants))
        out.append(Finding(
            "generator_unused", tuple(arms),
            f"run.generator('{stream}') handed out and never drawn from in {len(variants)} run(s) of "
            f"{', '.join(arms)}",
            f"the '{stream}' generator gave these runs nothing (its state never moved), so nothing of theirs comes "
            f"from the seed's '{stream}' stream and no pairing by seed rests on it: pass it to what draws "
            f"(torch.randperm(n, generator=g), DataLoader(generator=g)) or stop asking for it", Effect.WARN))
    return out


def generator_unused_coverage(ev: SweepEvidence) -> Coverage:
    rows = ev.runs[ev.runs["status"] == "finished"] if len(ev.runs) else ev.runs
    handed = int(pd.notna(rows[UNUSED]).sum()) if UNUSED in rows else 0
    if not handed:
        return Coverage("generator_unused", f"no run of {len(rows)} was handed a generator by the run API "
                                            f"(run.generator, run.numpy_rng): not checked", False)
    return Coverage("generator_unused", f"{handed} of {len(rows)} finished runs were handed generators; whether "
                                        f"each was drawn from is recorded", True)
