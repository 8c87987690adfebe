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

import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from sweeper.run.checkpoint import (
    CorruptCheckpoint,
    FingerprintMismatch,
    check_fingerprint,
    checkpoint_path,
    save_checkpoint,
)
from sweeper.run.envinfo import cuda_device_count, device_model, environment_record, thread_count, versions
from sweeper.run.envrefs import keep_env_refs
from sweeper.run.evaluation import EVAL_KEY, fingerprint_of
from sweeper.run.files.owner import process_identity
from sweeper.run.files.rundir import EXIT_INTERRUPTED, KEEP, RunDir, Status, Summary, UnreadableFile, stable_hash
from sweeper.run.provenance import code_record
from sweeper.run.ranks import RankedRun, Ranks, any_rank, barrier, gather_to_main, grouped, leave_group
from sweeper.run.stopping import StopRequest
from sweeper.run.streams import STREAMS, SeedStreams, capture_rng_states, restore_rng_states

__all__ = ["init", "Run", "ConfigError", "FingerprintMismatch", "CorruptCheckpoint", "STREAMS", "RUN_DIR_ENV"]
RUN_DIR_ENV = "SWEEPER_RUN_DIR"          # set by every sweeper backend for the run's process
TENSORBOARD_ENV = "SWEEPER_TENSORBOARD"  # "1": run.log also writes TensorBoard event files


class ConfigError(ValueError):
    """A bad config value: the run fails with exit status 2 and is never retried."""


class Run(RankedRun):
    """One run of a sweep, seen from inside its process. Made by `init()`. Its ranks: sweeper.run.ranks.RankedRun."""

    def __init__(self, rundir: RunDir, config: dict, *, keep_checkpoints: int = 2, tensorboard: bool = False):
        from omegaconf import OmegaConf  # deferred: omegaconf (0.1 s), only when this runs

        self.dir = rundir
        self.config_dict = dict(config)
        self.config = OmegaConf.create(self.config_dict)
        self.config_hash = stable_hash(self.config_dict)
        try:
            record = rundir.read_status()
        except UnreadableFile as e:
            print(f"WARNING: {e}", file=sys.stderr, flush=True)
            record = rundir.update_status(Status.PENDING)
        seed = self.config_dict.get("seed", record.seed if record.seed is not None else 0)
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
        self._recorded.update(code_record(self.env.get("git")))     # the code it runs (sweeper.run.provenance)
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

    # -- seeds ------------------------------------------------------------------------------------------------
    def seed_for(self, stream: str) -> int:
        """The seed of one named stream (recorded as used: the summary's fingerprint lists the streams drawn,
        which is what the report's paired test needs to know)."""
        value = self.streams.seed_for(stream)
        self.streams_used.add(stream)
        return value

    def generator(self, stream: str):
        """A torch.Generator seeded from one named stream."""
        self.seed_for(stream)
        return self.streams.generator(stream)

    def numpy_rng(self, stream: str):
        """A numpy.random.Generator seeded from one named stream."""
        self.seed_for(stream)
        return self.streams.numpy(stream)

    def manual_seed(self, stream: str) -> None:
        """Seed torch's global CPU (and CUDA) RNG from a stream: e.g. "init" before building the model."""
        import torch  # deferred: torch (about 2 s to import), only when this runs

        seed = self.seed_for(stream)
        torch.manual_seed(seed)
        if torch.cuda.is_initialized():
            torch.cuda.manual_seed_all(seed)

    def seed_all(self) -> None:
        """python and numpy global RNGs from the "python" stream; torch's (if imported) from "init"."""
        random.seed(self.seed_for("python"))
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(self.seed_for("python") % 2**32)
        if "torch" in sys.modules:
            self.manual_seed("init")

    # -- metrics, health, TensorBoard ------------------------------------------------------------------------
    def log(self, step: int, **metrics: Any) -> dict:
        """Append one metrics line {"step": step, **health metrics measured since the last line, **metrics}."""
        record = {"step": int(step), **(self._health.take_pending() if self._health else {}), **metrics}
        record = {k: _plain(v) for k, v in record.items()}
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

    def eval_fingerprint(self, data: Any = None, *, fingerprint: str | None = None) -> str:
        """Hash what this run is evaluated on, once per run (where the validation set is built): the examples,
        a map-style dataset or their ids (sweeper.run.evaluation.fingerprint_of), or your own `fingerprint`
        string. The summary records it (fingerprint.eval_fingerprint) and the report checks that every arm and
        seed was evaluated on the same data. Returns the fingerprint."""
        value = str(fingerprint) if fingerprint is not None else fingerprint_of(data)
        self._recorded[EVAL_KEY] = value
        return value

    # -- checkpoints ------------------------------------------------------------------------------------------
    def fingerprint(self, extra: Mapping | None = None) -> dict:
        """What must not change between a checkpoint and its resume: config, seed, versions, threads, devices."""
        lib = versions()
        base = {"config_hash": self.config_hash, "seed": self.seed, "python_version": lib["python"],
                "torch_version": lib["torch"] if "torch" in sys.modules else None,
                "num_threads": thread_count(), "cuda_device_count": cuda_device_count(),
                "world_size": self.world_size, "device_model": device_model()}
        return {**base, **dict(extra or {})}

    def save_checkpoint(self, state: Any, step: int, fingerprint: Mapping | None = None,
                        rank_state: Any = None) -> Path:
        """Write ckpt/step_<step>.pt atomically: `state`, every RNG state, health state, the fingerprint.

        Several ranks: every rank calls it (a collective); rank 0's `state` is saved (the state the ranks
        share: model, optimizer), with every rank's RNG states and its own `rank_state` (what differs between
        ranks), and it returns once the file is written."""
        self._fingerprint = self.fingerprint(fingerprint)
        rng = capture_rng_states()
        everyone = gather_to_main({"rng": rng, "rank_state": rank_state}) if self._collective() else None
        path = checkpoint_path(self.dir.ckpt_dir, int(step))
        if self.is_main:
            blob = {"step": int(step), "state": state, "rng": rng, "fingerprint": self._fingerprint,
                    "config": self.config_dict, "health": self._health.state_dict() if self._health else None,
                    "wall_s": self._wall_s()}
            if everyone is not None and len(everyone) > 1:
                blob.update(world_size=len(everyone), ranks=everyone)
            path = save_checkpoint(self.dir.ckpt_dir, int(step), blob, keep=self.keep_checkpoints)
        if everyone is not None or grouped():
            barrier()
        return path

    def load_checkpoint(self, fingerprint: Mapping | None = None) -> Any:
        """The newest valid checkpoint's state (RNG states restored, metrics after it dropped), or None.

        Corrupt newer files are moved aside and named in stdout and the run's status; a checkpoint from another
        setup (fingerprint: world size and device model too) raises FingerprintMismatch naming what differs.
        Several ranks (a collective): rank 0 chooses the checkpoint, every rank reads it and gets its own RNG
        states back, and its rank_state in run.rank_state."""
        loaded = self._load_latest()
        fallback = loaded.path.name if loaded.path else "no valid checkpoint left, restarting from step 0"
        notes = [f"{p.name}: {why}" for p, why in loaded.skipped]
        for line in notes:
            print(f"WARNING: corrupt checkpoint skipped, falling back to an older one ({fallback}): {line}", flush=True)
        if notes and self.is_main:
            self.dir.update_status(warnings=[f"corrupt checkpoint skipped ({fallback}): {s}" for s in notes])
            self.extra["skipped_checkpoints"] = notes
        current = self._fingerprint = self.fingerprint(fingerprint)   # the summary names it even without a save
        if loaded.state is None:
            if self.is_main:
                self.dir.keep_metrics_until(None)
            return None
        blob = loaded.state
        check_fingerprint(blob["fingerprint"], current, self.dir.path, blob.get("config"), self.config_dict)
        mine = (blob.get("ranks") or [{"rng": blob["rng"]}])[self.rank]
        restore_rng_states(mine["rng"])
        self.rank_state = mine.get("rank_state")
        self.start_step = self._last_step = int(blob["step"])
        self._wall_before = float(blob.get("wall_s") or 0.0)     # older checkpoints: this segment only
        if self.is_main:
            self.dir.keep_metrics_until(self.start_step)
        self._health_saved = blob.get("health")
        if self._health is not None and self._health_saved:
            self._health.load_state_dict(self._health_saved)
        self.extra["resumed_from"] = loaded.path.name
        print(f"resumed from {loaded.path} at step {self.start_step}", flush=True)
        return blob["state"]

    # -- stopping and ending ------------------------------------------------------------------------------------
    @property
    def should_stop(self) -> bool:
        """True once a stop signal arrived: save a checkpoint and `sys.exit(run.interrupt(step))`. Several
        ranks: a collective, True on every rank once one rank got the signal (they stop at the same step)."""
        local = self.stop.requested is not None
        if not self._collective():
            return local
        agreed = any_rank(local)
        if agreed and not local:
            self.stop.requested = "a stop request of another rank"
        return agreed

    def request_stop(self, reason: str) -> None:
        self.stop.requested = self.stop.requested or reason

    def interrupt(self, step: int) -> int:
        """Record the run as stopped at `step` with a checkpoint saved; returns the exit status to use (75)."""
        why = f"stopped by {self.stop.requested or 'request'} at step {step}; checkpoint saved"
        self._end(Status.INTERRUPTED, {}, step, error=why, exit_code=EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED

    def finish(self, final: Mapping | None = None, *, steps: int | None = None, cost: Mapping | None = None,
               **metrics: Any) -> dict:
        """Record the run's final metrics in its summary and mark it finished. Returns the summary.

        cost: figures of what the run cost that depend on the machine, not on the seed (e.g. tokens_per_s); they
        go to the summary's `cost` beside the measured wall_time_s and peak_rss_mb (never into `final`, which
        is the run's bitwise-reproducible result) and the report can use them as secondary metrics."""
        return self._end(Status.FINISHED, {**dict(final or {}), **metrics}, steps, error=None, exit_code=0,
                         cost=cost)

    def diverged(self, step: int, reason: str, last_good_checkpoint: int | None = None, **final: Any) -> dict:
        """Record a NaN/inf loss or gradient: status "diverged" (an outcome, kept and flagged, never rerun)."""
        if self._health is not None:
            self._health.finish(diverged_at=step, reason=reason, last_good_checkpoint=last_good_checkpoint)
        return self._end(Status.DIVERGED, final, step, error=f"{reason} at step {step}", exit_code=0,
                         diverged_at_step=step, last_good_checkpoint=last_good_checkpoint)

    def fail(self, error: str, exit_code: int = 1) -> None:
        """Record a failure (the entry runner and the crash hook call this). A rank > 0 says it on its own
        output only: the launcher names the rank whose exit ended the run."""
        self.outcome = Status.FAILED
        if self.is_main:
            self.dir.update_status(Status.FAILED, error=error, exit_code=exit_code, ended=time.time())
        else:
            print(f"rank {self.rank} of {self.world_size} failed: {error}", file=sys.stderr, flush=True)
        self.close()

    def _wall_s(self) -> float:
        """The run's wall time so far: every earlier segment's up to the checkpoint it resumed from, and this one's
        (work redone after a kill, and the time between segments, are not counted)."""
        return self._wall_before + (time.time() - self._t0)

    def _end(self, status: Status, final: Mapping, steps: int | None, cost: Mapping | None = None,
             **fields) -> dict:
        if self._health is not None and status is not Status.DIVERGED:
            self._health.finish()
        steps = steps if steps is not None else self._last_step
        wall = self._wall_s()
        measured = {"wall_time_s": wall, "peak_rss_mb": _peak_rss_mb()}
        summary = Summary(status=status, final={k: _plain(v) for k, v in final.items()}, steps=steps,
                          wall_time_s=wall, run_id=self.run_id, experiment=self.experiment,
                          variant=self.variant, seed=self.seed, config_hash=self.config_hash,
                          fingerprint={**(self._fingerprint or self.fingerprint()), **self._stream_record(),
                                       **self._recorded},
                          env=self.env,
                          extra={**self.extra, "cost": {**measured, **{k: _plain(v) for k, v in (cost or {}).items()}}})
        if self.is_main:
            self.dir.write_summary(summary)
            self.dir.update_status(status, ended=time.time(), **fields)
        self.outcome, self.summary = status, summary.to_dict()
        self.close()
        return self.summary

    def _stream_record(self) -> dict:
        """The summary's record of the seed streams drawn ("data_order,init"): two runs of one seed that drew
        data_order share their data order, so the report pairs them (not in checkpoints: a resume draws the
        streams again after loading)."""
        return {"seed_streams": ",".join(sorted(self.streams_used))} if self.streams_used else {}

    def close(self) -> None:
        """Restore the signal handlers, close TensorBoard, leave the process group (finish/interrupt/diverged/fail)."""
        self.stop.__exit__(None, None, None)
        leave_group()
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _peak_rss_mb() -> float | None:
    """This process's peak resident memory in MiB (Linux reports KiB; macOS bytes); None where unknown."""
    try:
        import resource  # optional: the stdlib has it on Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _plain(value: Any) -> Any:
    """Tensors and numpy scalars become Python numbers (metrics files hold JSON)."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        return value.item()
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
