"""A run's status and summary records: typed, to and from the dicts RunDir writes and reads. Pure Python.

    record = StatusRecord(status=Status.RUNNING, run_id="rope/seed_0", seed=0)
    record.to_dict()                                   # {"status": "running", "run_id": ..., ...}: JSON-able
    StatusRecord.from_dict(d, path)                    # typed again; UnreadableFile names `path` when d is bad
    Summary(status=Status.FINISHED, final={"val_loss": 1.8}, steps=300).to_dict()
    Summary.from_dict(d, path)                         # its `used` block typed (sweeper.run.files.usage.Usage)

Keys a record does not know are kept in `extra` and written back. The files themselves are read and written
through RunDir (sweeper.run.files.rundir); the values of `status` are sweeper.run.files.status_values.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.status_values import STATUSES, Status
from sweeper.run.files.usage import Usage


def _split(cls, d: dict) -> tuple[dict, dict]:
    """(known fields, everything else) of a record dict for a dataclass with an `extra` field."""
    names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    return {k: v for k, v in d.items() if k in names}, {k: v for k, v in d.items() if k not in names}


@dataclass
class StatusRecord:
    status: Status = Status.PENDING
    run_id: str | None = None
    experiment: str | None = None
    variant: str | None = None
    seed: int | None = None
    error: str | None = None
    exit_code: int | None = None
    started: float | None = None
    ended: float | None = None
    attempts: int | None = None
    failure_class: str | None = None
    transient: bool | None = None
    warnings: list[str] = field(default_factory=list)
    owner: dict | None = None      # who runs it while `running`: sweeper.run.files.owner.process_identity()
    extra: dict[str, Any] = field(default_factory=dict)   # e.g. diverged_at_step, last_good_checkpoint

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out["status"] = self.status.value
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, d: dict, path: Path) -> "StatusRecord":
        """The record of dict `d`, read from `path` (named by UnreadableFile when a field is bad)."""
        known, extra = _split(cls, d)
        try:
            known["status"] = Status(known.get("status", "pending"))
        except ValueError:
            raise UnreadableFile(path, f"status {d.get('status')!r} is not one of {', '.join(STATUSES)}",
                                 "delete it to let the run start again") from None
        if known.get("seed") is not None and (not isinstance(known["seed"], int) or isinstance(known["seed"], bool)):
            raise UnreadableFile(path, f"seed {known['seed']!r} is not an integer", "delete it")
        known["warnings"] = list(known.get("warnings") or [])
        if known.get("owner") is not None and not isinstance(known["owner"], dict):
            raise UnreadableFile(path, f"owner {known['owner']!r} is not a JSON object", "delete it")
        return cls(**known, extra=extra)


@dataclass
class Summary:
    status: Status
    final: dict[str, Any] = field(default_factory=dict)   # the run's final metrics: what the report decides on
    steps: int | None = None
    wall_time_s: float | None = None
    run_id: str | None = None
    experiment: str | None = None
    variant: str | None = None
    seed: int | None = None
    config_hash: str | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    used: Usage = field(default_factory=Usage)            # what the run read, drew and consumed (files/usage.py)
    extra: dict[str, Any] = field(default_factory=dict)   # e.g. determinism, resumed_from

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out["status"] = Status(self.status).value
        out["used"] = self.used.to_dict()
        if not out["used"]:
            del out["used"]                    # a run that recorded nothing of it (older summaries look the same)
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, d: dict, path: Path) -> "Summary":
        """The summary of dict `d`, read from `path` (named by UnreadableFile when a field is bad)."""
        known, extra = _split(cls, d)
        fix = "delete it (the run is then redone or resumed from its checkpoints)"
        try:
            known["status"] = Status(known.get("status"))
        except ValueError:
            raise UnreadableFile(path, f"status {d.get('status')!r} is not one of {', '.join(STATUSES)}", fix) from None
        if not isinstance(known.get("final", {}), dict):
            raise UnreadableFile(path, "'final' is not a mapping of metric -> value", fix)
        for key in ("fingerprint", "env"):
            if not isinstance(known.get(key) or {}, dict):
                raise UnreadableFile(path, f"{key!r} is not a JSON object", fix)
            known[key] = known.get(key) or {}
        known["used"] = Usage.from_dict(known.get("used"), path)
        if known.get("config_hash") is None:
            known["config_hash"] = known["fingerprint"].get("config_hash")
        return cls(**known, extra=extra)
