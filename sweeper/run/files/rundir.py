"""The run contract: the one owner of a run directory's files (the sweep manifest: sweeper.run.files.manifest).
Torch-free.

    rd = RunDir(sweep_dir / "runs" / "rope" / "seed_0")
    rd.update_status(Status.RUNNING, started=time.time())     # status.json, atomic
    rd.read_status().status                                    # Status.RUNNING; UnreadableFile names a bad file
    rd.append_metrics({"step": 10, "train_loss": 3.2})        # metrics.jsonl, one fsynced line
    rd.write_summary(Summary(status=Status.FINISHED, final={"val_loss": 1.8}, steps=300))
    rd.outcome()                                               # what a launcher acts on (see below)
    rd.liveness()                                              # "live" | "stale" | "unknown" for a running run

Layout of a run dir (every backend, our trainer and any user's code write it through this module):
    config.yaml   the run's resolved, frozen config       status.json   pending|running|finished|failed|...
    metrics.jsonl one JSON object per logged step         summary.json  final metrics, steps, wall time, env
    health.json   health verdict (sweeper.health)         env.json      what the run saw (threads, devices)
    stdout.log    the run's output                        ckpt/         RNG-state checkpoints
Every file another process reads is written atomically (temp file, fsync, rename). No file of a run dir is
read or written through a symbolic link (sweeper.run.files.atomic.open_nofollow: a planted link is refused).
A file that exists but cannot be parsed raises UnreadableFile naming it and the fix; readers that must go on
(the report) catch it and show the message, never silently skip the run.

The rest of the contract, one concept a module: the states and exit codes (sweeper.run.files.status_values), the
status and summary records (sweeper.run.files.records), UnreadableFile and the JSON readers
(sweeper.run.files.reading), stable_hash (sweeper.run.files.hashing).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from sweeper.errors import not_text
from sweeper.run.files.atomic import (
    append_jsonl,
    append_jsonl_many,
    append_lines,
    atomic_write_json,
    atomic_write_text,
    open_nofollow,
    open_text,
    read_tail,
    rewrite_jsonl,
)
from sweeper.run.files.owner import alive
from sweeper.run.files.reading import UnreadableFile, json_object, load_json_file
from sweeper.run.files.records import StatusRecord, Summary
from sweeper.run.files.status_values import KEEP, LIVE, LOST_SUMMARY, STALE, UNKNOWN, Status

STATUS, SUMMARY, METRICS = "status.json", "summary.json", "metrics.jsonl"
CONFIG, HEALTH, ENV, LOG, CKPT = "config.yaml", "health.json", "env.json", "stdout.log", "ckpt"
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)   # libyaml when built with it: the same YAML, ~10x faster


# -- one run directory ----------------------------------------------------------------------------------------

def _child(name: str) -> functools.cached_property:
    """RunDir attribute: path / name, built once on first access."""
    prop = functools.cached_property(lambda self: self.path / name)
    prop.__doc__ = f"the run's {name}"
    return prop


class RunDir:
    """The files of one run. Paths are attributes; records go through the methods."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # each file's path is built on first use (a report reads 10,000s of RunDirs and a few files of each)
    config_path = _child(CONFIG)
    status_path, summary_path = _child(STATUS), _child(SUMMARY)
    metrics_path, health_path = _child(METRICS), _child(HEALTH)
    env_path, log_path, ckpt_dir = _child(ENV), _child(LOG), _child(CKPT)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # status.json
    def read_status(self) -> StatusRecord:
        """The recorded status (PENDING when there is none yet); UnreadableFile when status.json is damaged."""
        raw = load_json_file(self.status_path, "run status", "delete it to let the run start again")
        if raw is None:
            return StatusRecord()
        return StatusRecord.from_dict(json_object(raw, self.status_path, "run status", "delete it"), self.status_path)

    def write_status(self, record: StatusRecord) -> StatusRecord:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.status_path, record.to_dict())
        return record

    def update_status(self, status: Status | str | None = None, **fields) -> StatusRecord:
        """Read, change and write status.json. A damaged status.json is replaced (its damage noted in warnings)."""
        try:
            record = self.read_status()
        except UnreadableFile as e:
            record = StatusRecord(warnings=[f"replaced a damaged status.json ({e.why})"])
        if status is not None:
            record.status = Status(status)
        for key, value in fields.items():
            if hasattr(record, key) and key != "extra":
                setattr(record, key, value)
            else:
                record.extra[key] = value
        return self.write_status(record)

    def state(self) -> Status:
        """The recorded status (PENDING when there is none); a damaged status.json raises UnreadableFile."""
        return self.read_status().status

    def outcome(self) -> Status:
        """The state a launcher acts on. A summary that says the run finished (or diverged) wins over a status
        that is missing, damaged, `running` or `interrupted` (a stop at the moment the run ended), and the status
        is repaired; a damaged status with no finished summary counts as FAILED (the run is redone). A status
        that says finished (or diverged) without a readable summary is a result lost: the run becomes
        interrupted (LOST_SUMMARY says why) and is run again, from its last checkpoint."""
        try:
            record = self.read_status()
            damaged = None
        except UnreadableFile as e:
            record, damaged = StatusRecord(status=Status.FAILED), e
        try:
            summary = self.read_summary()
            unreadable = None
        except UnreadableFile as e:
            summary, unreadable = None, e
        if record.status in KEEP and summary is not None and summary.status in KEEP:
            return record.status
        if record.status in KEEP:                      # finished, but its result (the summary) is gone
            why = "is missing" if unreadable is None else f"cannot be read ({unreadable.why})"
            self.update_status(Status.INTERRUPTED, error=f"{record.status.value}, but its summary.json {why}: "
                               f"{LOST_SUMMARY}; it runs again from its last checkpoint", exit_code=None)
            return Status.INTERRUPTED
        if summary is not None and summary.status in KEEP:
            self.update_status(summary.status, error=None, exit_code=0, ended=record.ended or time.time(),
                               run_id=record.run_id or summary.run_id)
            return summary.status
        if damaged is not None:
            self.update_status(Status.FAILED, error=f"status.json was damaged: {damaged.why}")
        return record.status

    def liveness(self, record: StatusRecord | None = None) -> str | None:
        """For a run recorded `running`: LIVE (its process runs), STALE (its process, on this host, is gone: a
        killed sweeper or a SIGKILLed run) or UNKNOWN (another host, or no owner recorded); None otherwise.
        A damaged status raises UnreadableFile."""
        record = self.read_status() if record is None else record
        if record.status is not Status.RUNNING:
            return None
        state = alive(record.owner)
        return UNKNOWN if state is None else LIVE if state else STALE

    def repair_stale(self) -> Status | None:
        """A stale `running` becomes what it is: finished when its summary says so, else interrupted (resumable
        from its checkpoints). Returns the new state, None when the run was not stale."""
        try:
            record = self.read_status()
        except UnreadableFile:
            return None
        if self.liveness(record) != STALE:
            return None
        state = self.outcome()
        if state is Status.RUNNING:
            owner = record.owner or {}
            self.update_status(Status.INTERRUPTED, owner=None, ended=time.time(), exit_code=None,
                               error=f"its process (pid {owner.get('pid')} on {owner.get('host')}) was gone: "
                                     f"the sweeper or the run was killed; resumes from its last checkpoint")
            return Status.INTERRUPTED
        return state

    # summary.json
    def read_summary(self) -> Summary | None:
        fix = "delete it (the run is then redone or resumed from its checkpoints)"
        raw = load_json_file(self.summary_path, "run summary", fix)
        if raw is None:
            return None
        return Summary.from_dict(json_object(raw, self.summary_path, "run summary", fix), self.summary_path)

    def write_summary(self, summary: Summary) -> Summary:
        atomic_write_json(self.summary_path, summary.to_dict())
        return summary

    # metrics.jsonl
    def set_aside_summary(self) -> None:
        """Move summary.json to summary.rejected.json (a result the sweep refused: a resume runs the run again)."""
        if self.summary_path.exists():
            self.summary_path.replace(self.path / "summary.rejected.json")

    def set_aside_checkpoints(self) -> None:
        """Move ckpt/ to ckpt.rejected/ (replacing an older one): the next launch starts the run from scratch."""
        if self.ckpt_dir.is_dir() and not self.ckpt_dir.is_symlink():
            aside = self.path / "ckpt.rejected"
            if aside.is_dir() and not aside.is_symlink():
                shutil.rmtree(aside)
            self.ckpt_dir.replace(aside)

    def append_metrics(self, record: dict) -> None:
        step = record.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise ValueError(f"a metrics line needs an integer 'step', got {step!r}")
        self.path.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.metrics_path, record)

    def append_metrics_many(self, records: list[dict], default=str) -> None:
        """append_metrics for many lines at once (one write, one fsync), each checked as append_metrics does;
        `default` turns a value JSON lacks into one it has (sweeper.run: tensors and numpy scalars to numbers)."""
        for record in records:
            step = record.get("step")
            if type(step) is not int:
                raise ValueError(f"a metrics line needs an integer 'step', got {step!r}")
        self.path.mkdir(parents=True, exist_ok=True)
        append_jsonl_many(self.metrics_path, records, default)

    def append_metrics_lines(self, data: bytes) -> None:
        """Metrics lines already JSON, appended as they are (one write, one fsync): a zero-glue run's reported
        step lines, each one JSON object with an integer step (sweeper.run.observed.stdout_metrics checked them)."""
        self.path.mkdir(parents=True, exist_ok=True)
        append_lines(self.metrics_path, data)

    def read_metrics(self) -> tuple[list[dict], int]:
        """(every complete line with an integer step, the number of truncated or corrupt lines skipped)."""
        return parse_metrics(self.metrics_text())

    def metrics_text(self) -> str:
        try:
            with open_text(self.metrics_path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def last_metrics(self, tail_bytes: int = 4096) -> dict:
        """The last complete metrics line (cheap: reads the file's tail only)."""
        for line in reversed(read_tail(self.metrics_path, tail_bytes).splitlines()):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                return rec
        return {}

    def keep_metrics_until(self, step: int | None) -> None:
        """Drop lines logged after `step` (a resumed run logs them again); None drops every line."""
        if step is None:
            self.metrics_path.unlink(missing_ok=True)
        elif self.metrics_path.exists():
            records, _ = self.read_metrics()
            rewrite_jsonl(self.metrics_path, [r for r in records if r["step"] <= step])

    # config.yaml, env.json (health.json belongs to sweeper.health.result)
    def read_config(self) -> dict:
        try:
            with os.fdopen(open_nofollow(self.config_path, os.O_RDONLY), encoding="utf-8") as f:
                cfg = yaml.safe_load(f.read())
        except FileNotFoundError:
            raise UnreadableFile(self.config_path, "the run's config is missing",
                                 "this run dir was not planned by sweeper; pass config= to sweeper.run.init") from None
        except UnicodeDecodeError as e:
            raise UnreadableFile(self.config_path, f"the run's config is not UTF-8 text ({not_text(e)})",
                                 "restore it or start a new sweep") from None
        except (OSError, yaml.YAMLError) as e:
            raise UnreadableFile(self.config_path, f"the run's config is not readable YAML "
                                 f"({' '.join(str(e).split())})", "restore it or start a new sweep") from None
        if not isinstance(cfg, dict):
            raise UnreadableFile(self.config_path, "the run's config is not a mapping", "restore it")
        return cfg

    def write_config(self, config: dict) -> None:
        text = yaml.dump(config, Dumper=_DUMPER, sort_keys=False, default_flow_style=False)
        atomic_write_text(self.config_path, text)

    def rank_path(self, path: Path, rank: int) -> Path:
        """Rank `rank`'s own copy of a per-process file of a multi-rank run: env.json -> env.rank1.json,
        stdout.log -> stdout.rank1.log; rank 0 (and a one-process run) keeps the plain name."""
        return path if not rank else path.with_name(f"{path.stem}.rank{rank}{path.suffix}")

    def write_env(self, record: dict, rank: int = 0) -> None:
        atomic_write_json(self.rank_path(self.env_path, rank), record)

    def read_env(self, rank: int = 0) -> dict:
        path = self.rank_path(self.env_path, rank)
        raw = load_json_file(path, "run environment record", "delete it")
        return json_object(raw, path, "run environment record", "delete it") if raw is not None else {}

    def has_checkpoint(self) -> bool:
        return self.ckpt_dir.is_dir() and any(p.name.startswith("step_") and p.suffix == ".pt"
                                              for p in self.ckpt_dir.iterdir())

    def checkpoint_step(self) -> int | None:
        """The step of the newest checkpoint (what a resume starts from), from the file names alone; None
        when there is none. The checkpoint's content is checked when it is loaded, not here."""
        if not self.ckpt_dir.is_dir():
            return None
        steps = [int(p.stem[5:]) for p in self.ckpt_dir.iterdir()
                 if p.name.startswith("step_") and p.suffix == ".pt" and p.stem[5:].isdigit()]
        return max(steps) if steps else None


def parse_metrics(text: str) -> tuple[list[dict], int]:
    """Records of metrics.jsonl text with an integer step, and how many lines were skipped (truncated/corrupt)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        records, bad = json.loads("[" + ",".join(lines) + "]"), 0        # one C-level parse in the common case
    except ValueError:
        records, bad = [], 0
        for ln in lines:
            try:
                records.append(json.loads(ln))
            except ValueError:
                bad += 1
    good = [r for r in records if isinstance(r, dict) and isinstance(r.get("step"), int)]
    return good, bad + len(records) - len(good)

