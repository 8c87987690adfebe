"""The run API: what any training code calls to become a sweepable, resumable, health-checked sweeper run.

    import sweeper
    run = sweeper.init()                        # inside a sweep (SWEEPER_RUN_DIR); alone: init(run_dir, config)
    cfg = run.config                            # the run's resolved config (OmegaConf), cfg.seed == run.seed
    run.seed_all()                              # python / numpy / torch global RNGs from the seed's streams
    g = run.generator("data_order")             # one named stream: init, data_order, dropout, eval_batches, python
    state = run.load_checkpoint()               # None, or what save_checkpoint saved (RNG states restored too)
    for step in range(run.start_step, cfg.steps):
        if run.should_stop:                     # SIGTERM / SIGINT / SIGUSR1 / SIGUSR2, Slurm preemption
            run.save_checkpoint(my_state(), step)
            sys.exit(run.interrupt(step))       # exit 75: the next launch resumes, bitwise
        ...
        run.log(step, train_loss=loss)          # the run's metrics (+ TensorBoard with sweeper.tensorboard=true)
    run.eval_fingerprint(val_ids)               # once: what the run is evaluated on (the report compares arms)
    run.consumed(examples=64, steps=1)          # each step: the compute ledger (or examples_seen=... at finish)
    run.finish(val_loss=val)                    # its summary: the numbers the decision table is made of

A run of several processes (launcher.ranks_per_run=N: data-parallel ranks, torchrun's environment) is one
Run per process: run.rank, run.world_size, run.distributed() joins the process group (gloo on CPU, nccl on
CUDA); rank 0 alone writes status, metrics, summary, health and checkpoints; run.should_stop, save_checkpoint
and load_checkpoint are collectives then (every rank calls them at the same point): a stop request that reached
one rank stops every rank at the same step, a checkpoint holds every rank's RNG states (and its rank_state),
and a resume restores each rank's own. run.rank_streams are this rank's own seed streams (dropout).

`python -m sweeper.run MODULE:FUNCTION RUN_DIR` calls FUNCTION(run) in a fresh process (what a sweep with
`task.entry` launches); a script named by `task.command` calls `sweeper.init()` itself. Torch is optional:
code without it gets python and numpy RNG states and pickle checkpoints.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from sweeper.run.checkpoint import CorruptCheckpoint, FingerprintMismatch
from sweeper.run.checkpointing import RunCheckpoints
from sweeper.run.ending import RunEnding, plain
from sweeper.run.files.hashing import stable_hash
from sweeper.run.files.owner import process_identity
from sweeper.run.files.reading import UnreadableFile
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import KEEP, Status
from sweeper.run.observed.envinfo import environment_record, numbers_env
from sweeper.run.observed.envrefs import keep_env_refs
from sweeper.run.observed.evaluation import EVAL_KEY, fingerprint_of
from sweeper.run.observed.provenance import code_record
from sweeper.run.ranks import RankedRun, Ranks
from sweeper.run.seeding import RunSeeds
from sweeper.run.stopping import StopRequest
from sweeper.run.streams import STREAMS, SeedStreams
from sweeper.run.usage import ConfigReads, RunUsage, track_reads

__all__ = ["init", "Run", "ConfigError", "FingerprintMismatch", "CorruptCheckpoint", "STREAMS", "RUN_DIR_ENV"]
RUN_DIR_ENV = "SWEEPER_RUN_DIR"          # set by every sweeper backend for the run's process
TENSORBOARD_ENV = "SWEEPER_TENSORBOARD"  # "1": run.log also writes TensorBoard event files


class ConfigError(ValueError):
    """A bad config value: the run fails with exit status 2 and is never retried."""


def _json_value(value: Any) -> Any:
    """What JSON writes for a value it lacks: a tensor's or numpy scalar's number (plain), else its text."""
    out = plain(value)
    return str(out) if out is value else out


class Run(RankedRun, RunSeeds, RunCheckpoints, RunEnding, RunUsage):
    """One run of a sweep, seen from inside its process. Made by `init()`. Its ranks: sweeper.run.ranks.RankedRun."""

    def __init__(self, rundir: RunDir, config: dict, *, keep_checkpoints: int = 2, tensorboard: bool = False):
        from omegaconf import OmegaConf  # deferred: omegaconf (0.1 s), only when this runs

        self.dir = rundir
        self._config_dict = dict(config)
        self._reads: ConfigReads | None = ConfigReads()   # the keys read through run.config (sweeper.run.usage)
        self.config = track_reads(OmegaConf.create(self._config_dict), self._reads)
        self.config_hash = stable_hash(self._config_dict)
        try:
            record = rundir.read_status()
        except UnreadableFile as e:
            print(f"WARNING: {e}", file=sys.stderr, flush=True)
            record = rundir.update_status(Status.PENDING)
        seed = self._config_dict.get("seed", record.seed if record.seed is not None else 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ConfigError(f"seed={seed!r}: a seed is a non-negative integer")
        try:
            self.ranks = Ranks.from_env(os.environ)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self.seed, self.streams = seed, SeedStreams(seed)
        self.rank_streams = SeedStreams(seed, self.ranks.rank)   # this rank's own (rank 0: the shared ones)
        self.rank_state: Any = None                   # this rank's part of the loaded checkpoint (save_checkpoint)
        self.streams_used: set[str] = set()          # named streams this run drew from (seed_for, generator, ...)
        self._handed: dict[str, list] = {}           # stream -> [(generator, its state when handed out)]
        self._consumed: dict[str, int] = {}          # the compute ledger: examples, tokens, steps (run.consumed)
        self._sizes: dict[str, int] = {}             # train_size, eval_size (run.data_size, eval_fingerprint)
        self.run_id = record.run_id or rundir.path.name
        self.experiment, self.variant = record.experiment or "adhoc", record.variant or "default"
        self.keep_checkpoints = keep_checkpoints
        self.start_step = 0
        self.outcome: Status | None = None
        self.summary: dict | None = None               # what the run ended with (rank 0 records it)
        self.extra: dict[str, Any] = {}               # more summary fields (e.g. determinism flags)
        self._t0 = time.time()
        self._wall_before = 0.0      # the wall time of earlier segments (a resumed run's checkpoint says)
        self._last_step: int | None = None
        self._health = None
        self._health_saved: dict | None = None
        self._tb_enabled, self._tb = tensorboard, None
        self._fingerprint: dict = {}
        self._recorded: dict = {}                      # the summary's code and evaluation records (not checkpoints')
        self.env: dict = {}                            # what record_env() wrote to the run's env record
        self.finished = self._already_finished()
        self.stop = StopRequest()
        if self.finished:
            return
        if self.is_main:
            rundir.update_status(Status.RUNNING, run_id=self.run_id, seed=self.seed, error=None, exit_code=None,
                                 started=self._t0, ended=None, pid=os.getpid(), owner=process_identity())
            if not rundir.has_checkpoint():
                rundir.keep_metrics_until(None)       # a fresh start: earlier lines would be duplicates
        self.record_env()
        self._recorded.update(code_record(self.env.get("git")))     # the code it runs (sweeper.run.observed.provenance)
        self._recorded["environment"] = numbers_env()     # what changes its numbers (its identity key)
        if threading.current_thread() is threading.main_thread():
            self.stop.__enter__()

    def _already_finished(self) -> bool:
        """True when the run's summary already holds this config's final result (the status is repaired)."""
        try:
            summary = self.dir.read_summary()
        except UnreadableFile:
            return False
        if summary is None or summary.status not in KEEP:
            return False
        if summary.config_hash is not None and summary.config_hash != self.config_hash:
            return False                              # another config's result: this config runs
        self.outcome = summary.status
        if self.dir.outcome() != summary.status:
            self.dir.update_status(summary.status)
        return True

    # -- metrics, health, TensorBoard ------------------------------------------------------------------------
    def log(self, step: int, **metrics: Any) -> dict:
        """Append one metrics line {"step": step, **health metrics measured since the last line, **metrics}."""
        record = {"step": int(step), **(self._health.take_pending() if self._health else {}), **metrics}
        record = {k: plain(v) for k, v in record.items()}
        if not self.is_main:                          # rank 0 logs the run's metrics
            return record
        self.dir.append_metrics(record)
        if self._health is not None:                  # validation metrics are evidence (val_ keys / val_keys)
            self._health.observe_metrics(int(step), {k: record[k] for k in metrics})
        self._last_step = int(step)
        if self._tb_enabled:
            if self._tb is None:
                from sweeper.run.tensorboard import TensorBoardLog  # deferred: tensorboardX (an optional extra)

                self._tb = TensorBoardLog(self.dir.path / "tensorboard", self.experiment, self.variant, self.seed,
                                          purge_step=self.start_step or None)
            self._tb.log(record)
        return record

    def log_many(self, records: list[dict]) -> None:
        """run.log(r["step"], **the rest of r) for each record r, written at once (one write, one fsync): a
        zero-glue run's million reported lines in a second. With the live monitor or TensorBoard on, line by line."""
        if self._health is not None or self._tb_enabled:
            for r in records:
                self.log(r["step"], **{k: v for k, v in r.items() if k != "step"})
            return
        if self.is_main and records:
            self.dir.append_metrics_many(records, default=_json_value)
            self._last_step = int(records[-1]["step"])

    def log_lines(self, data: bytes, last_step: int | None) -> None:
        """Metrics lines already JSON (a zero-glue run's reported step lines: each one object with an integer
        step, sweeper.run.observed.stdout_metrics), appended as they are: one write, one fsync, no re-encoding. With the
        live monitor or TensorBoard on, record by record through run.log."""
        if self._health is not None or self._tb_enabled:
            self.log_many([json.loads(line) for line in data.splitlines()])
            return
        if self.is_main and data:
            self.dir.append_metrics_lines(data)
            self._last_step = last_step

    def health(self, model: Any, *, num_classes: int | None = None, interval: int = 10, preflight=None,
               thresholds=None, optimizer=None, total_steps: int | None = None, val_keys=None,
               val_data: Any = None, evaluate: Any = None):
        """The live monitor on `model` (sweeper.health.LiveMonitor), writing health.json. `preflight`: a
        function returning a HealthReport, run once at the start of a fresh run (not on resume). `thresholds`:
        a sweeper.health.Thresholds for the monitor (default: its defaults). `optimizer`, `total_steps`: the lr
        schedule and the optimizer's parameters are watched. `val_keys`: {"loss": KEY, "acc": KEY} naming the
        run.log keys of the validation metrics when they are not val_loss / val_acc (the val_ / val/ convention).
        `val_data`: a validation batch or loader; `evaluate`: your evaluation function, evaluate(model) ->
        number or dict (sweeper.run.health: eval_determinism at the start, batchnorm_stats at the end)."""
        from sweeper.run.health import RunHealth, SilentHealth  # deferred: torch (about 2 s): a script that
        #                                                          never asks for the monitor imports no torch
        if not self.is_main:                          # rank 0 watches the model (the same on every rank)
            self._health = SilentHealth()
            return self._health
        extra = {} if thresholds is None else {"thresholds": thresholds}
        self._health = RunHealth(model, self.dir.health_path, interval=interval, num_classes=num_classes,
                                 preflight=preflight, saved=self._health_saved, resumed=self.start_step > 0,
                                 optimizer=optimizer, total_steps=total_steps, val_keys=val_keys,
                                 val_data=val_data, evaluate=evaluate, **extra)
        return self._health

    def record_env(self, device: str | None = None) -> dict:
        """Write env.json: what this process sees (threads, devices, affinity, versions)."""
        self.env = environment_record(device)
        self.dir.write_env(self.env, rank=self.rank)  # env.json; rank r > 0: env.rank<r>.json
        return self.env

    def eval_fingerprint(self, data: Any = None, *, fingerprint: str | None = None, size: int | None = None) -> str:
        """Hash what this run is evaluated on, once per run (where the validation set is built): the examples,
        a map-style dataset or their ids (sweeper.run.observed.evaluation.fingerprint_of), or your own `fingerprint`
        string. The summary records it (fingerprint.eval_fingerprint) and the report checks that every arm and
        seed was evaluated on the same data. `size`: the number of evaluation examples (default: len(data) when
        data has one); the summary records it (used.eval_size) and the report compares it across arms too.
        Returns the fingerprint."""
        value = str(fingerprint) if fingerprint is not None else fingerprint_of(data)
        if size is not None or (data is not None and hasattr(data, "__len__") and not isinstance(data, (str, dict))):
            self.data_size(eval=size if size is not None else data)
        self._recorded[EVAL_KEY] = value
        return value

def init(run_dir: str | Path | None = None, config: Mapping | None = None, *, keep_checkpoints: int = 2,
         tensorboard: bool | None = None, record_crashes: bool = True) -> Run:
    """The current run. Inside a sweep, run_dir comes from SWEEPER_RUN_DIR and the config from its
    config.yaml; alone, pass run_dir (and config, which is then written there)."""
    run_dir = run_dir or os.environ.get(RUN_DIR_ENV)
    if not run_dir:
        raise RuntimeError(f"sweeper.init(): not launched by sweeper ({RUN_DIR_ENV} is not set); launch it with "
                           f"`python -m sweeper +experiment=...`, or pass run_dir= (and config=) to run it alone")
    rundir = RunDir(run_dir)
    rundir.path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        config = _container(config)
        rundir.write_config(config)
    else:
        config = rundir.read_config()
    if tensorboard is None:
        tensorboard = os.environ.get(TENSORBOARD_ENV, "") == "1"
    run = Run(rundir, config, keep_checkpoints=keep_checkpoints, tensorboard=tensorboard)
    if record_crashes and not run.finished:
        _record_crashes(run)
    return run


def _container(config: Mapping) -> dict:
    try:
        from omegaconf import DictConfig, OmegaConf  # deferred: omegaconf (0.1 s), only when this runs

        if isinstance(config, DictConfig):
            config = OmegaConf.create(OmegaConf.to_container(config, resolve=False))   # a copy: the caller's stays
            keep_env_refs(config)                     # ${oc.env:SECRET} stays a reference in config.yaml
            return OmegaConf.to_container(config, resolve=True)
    except ImportError:  # pragma: no cover - omegaconf comes with hydra-core
        pass
    if hasattr(config, "to_dict"):
        return config.to_dict()
    return dict(config)


def _record_crashes(run: Run) -> None:
    """A script that dies of an uncaught exception leaves status "failed" with the exception's line."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if run.outcome is None:
            run.fail(f"{kind.__name__}: {value}".strip().splitlines()[0], exit_code=1)
        previous(kind, value, tb)

    sys.excepthook = hook
