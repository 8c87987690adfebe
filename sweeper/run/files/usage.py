"""What a run actually used, as its summary records it (the summary's `used` block): the config keys it read, the
generators it was handed and whether it drew from them, its compute ledger (examples, tokens and optimizer steps
consumed) and the size of its training and evaluation data. Pure Python; read and written through RunDir.

    Usage(config_read=["lr", "model"], generators={"data_order": True}, examples=6400, steps=100).to_dict()
    Usage.from_dict(d, path)                 # typed again; UnreadableFile names `path` when a field is bad
    REPORTED["examples_seen"]                # "examples": the documented keys a script reports (run.finish or
                                             # a task.command's JSON line / metrics file) -> the field they fill

Every field is optional: None means the run did not record it (a check that needs it says "not checked").
`config_read` lists the dotted keys read (a mapping's own key when the run went through it); "model.*" is all of
`model` read at once (copied), "*" the whole config. was_read(key, config_read) says whether a key was read.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.run.files.reading import UnreadableFile

# The documented keys a script reports what it consumed (run.finish(..., examples_seen=N) or a task.command's
# final JSON line / metrics file): recorded here, never as metrics. Key -> the Usage field it fills.
REPORTED = {"examples_seen": "examples", "tokens_seen": "tokens", "optimizer_steps": "steps",
            "train_size": "train_size", "eval_size": "eval_size"}
WHOLE = "*"                   # config_read: the whole config was read at once (converted, iterated, copied)
COUNTS = ("examples", "tokens", "steps", "train_size", "eval_size")


@dataclass
class Usage:
    config_read: list[str] | None = None          # dotted keys the run read from run.config; None: not tracked
    generators: dict[str, bool] = field(default_factory=dict)   # stream -> drawn from (run.generator/numpy_rng)
    examples: int | None = None                   # training examples consumed (every step's batch, summed)
    tokens: int | None = None                     # training tokens consumed
    steps: int | None = None                      # optimizer steps taken
    train_size: int | None = None                 # examples in the training data the run drew from
    eval_size: int | None = None                  # examples the run is evaluated on

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: v for k, v in out.items() if v is not None and v != {}}

    @classmethod
    def from_dict(cls, d: Any, path: Path) -> "Usage":
        """The record of dict `d` (the summary's `used`), read from `path`; unknown keys are ignored."""
        fix = "delete it (the run is then redone or resumed from its checkpoints)"
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise UnreadableFile(path, "'used' is not a JSON object", fix)
        read = d.get("config_read")
        if read is not None and (not isinstance(read, list) or not all(isinstance(k, str) for k in read)):
            raise UnreadableFile(path, "'used.config_read' is not a list of keys", fix)
        gens = d.get("generators") or {}
        if not isinstance(gens, dict) or not all(isinstance(v, bool) for v in gens.values()):
            raise UnreadableFile(path, "'used.generators' is not a mapping of stream -> true/false", fix)
        counts = {}
        for name in COUNTS:
            value = d.get(name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
                raise UnreadableFile(path, f"'used.{name}' is {value!r}, not a non-negative number", fix)
            counts[name] = None if value is None else int(value)
        return cls(config_read=read, generators=dict(gens), **counts)


def was_read(key: str, config_read: list[str] | set[str]) -> bool:
    """Whether `key` (dotted) was read: itself, a key below it, or a mapping above it read whole."""
    reads = set(config_read)
    if key in reads or WHOLE in reads:
        return True
    parts = key.split(".")
    if any(".".join(parts[:i]) + "." + WHOLE in reads for i in range(1, len(parts) + 1)):
        return True
    return any(r.startswith(key + ".") or r.startswith(key + "[") for r in reads)


def reported_count(key: str, value: Any) -> int:
    """A script-reported count (examples_seen=6400): a non-negative whole number, else ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise ValueError(f"{key}={value!r}: {key} is a count of what the run consumed, a non-negative whole number")
    return int(value)
