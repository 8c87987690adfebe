"""The launcher groups' schema: `launcher=local` (the default) and `launcher=slurm`, their keys, defaults, ranges.

    python -m sweeper +experiment=rope launcher.max_parallel=2 --cfg     # every launcher key with its default
    cfg = LocalLauncherConf.from_dict(manifest.launcher)                 # checked as at compose (UsageError)

These dataclasses are the group options (stored in Hydra's ConfigStore by sweeper.config.schema.register) and the
types the backends run with (sweeper.backends.local.slots.LauncherConfig and sweeper.backends.slurm.backend.SlurmConfig are these). PoolConf
is also the Hydra plugin's `hydra/launcher=sweeper_pool` (hydra_plugins/sweeper_pool). Light: stdlib only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional

from sweeper.errors import UsageError
from sweeper.config.schema import at_least_zero, build, one_of, positive, ranks_rule, rule


def _seconds(default: float, strict: bool = False):
    if strict:
        return rule(default, must="must be a positive number of seconds", ok=lambda v: v > 0)
    return rule(default, must="must be a number of seconds >= 0", ok=lambda v: v >= 0)


@dataclass
class PoolConf:
    """The local pool: one run per GPU slot (CUDA_VISIBLE_DEVICES), or CPU-core slots when no GPU is visible."""
    devices: Optional[List[str]] = rule(None, must="must be a list of GPU ids, e.g. [0,2], or null",
                                        ok=lambda v: True)   # null = every GPU visible (honours CUDA_VISIBLE_DEVICES);
    #                                     an id is an index, a GPU UUID or a MIG UUID (each MIG instance is a slot)
    runs_per_device: int = positive(1)      # runs sharing one GPU (small models)
    ranks_per_run: int = ranks_rule(1)      # processes (data-parallel ranks) per run: one GPU each where GPUs exist,
    #                                         else a CPU slot each (gloo); per variant: experiment.resources
    cpu_only: bool = False                  # ignore GPUs, run CPU slots
    max_parallel: Optional[int] = positive(None, null=True)     # cap on concurrent runs; null = one per slot
    threads_per_run: Optional[int] = positive(None, null=True)  # CPU threads per run; null = the cores split evenly across the slots
    cores: Optional[List[int]] = rule(None, must="must be a list of CPU core ids, e.g. [0,1,2,3], or null",
                                      ok=lambda v: all(c >= 0 for c in v))   # null = this process's affinity set
    max_retries: int = at_least_zero(2)     # retries after a transient failure (killed by a signal, CUDA out of memory, lost node)
    retry_backoff_s: float = _seconds(5.0)  # delay before the first retry, doubled each time (a retry resumes from the checkpoint)
    crash_loop_after: int = at_least_zero(2)  # this many runs of a variant failing with the same error stop that variant (0 = off)
    grace_s: float = _seconds(20.0)         # Ctrl-C / SIGTERM: seconds from SIGTERM (runs checkpoint) to SIGKILL; Ctrl-C twice = now

    COMMA_LISTS: ClassVar[tuple[str, ...]] = ("devices", "cores")   # also written 3,5 / '3,5' / 3 (one id)

    @classmethod
    def from_dict(cls, d: dict | None, prefix: str = "launcher"):
        """A launcher mapping (composed, recorded in a manifest, or `launcher.devices=3,5` from sweeper.cli.resume)
        typed and checked exactly as composition does (which reads `launcher.devices=3,5` the same way)."""
        d = dict(d or {})
        for key in cls.COMMA_LISTS:           # also accept "3,5" (a shell-friendly list)
            if isinstance(d.get(key), (str, int)) and not isinstance(d.get(key), bool):
                d[key] = [p.strip() for p in str(d[key]).split(",") if p.strip()]
        return build(cls, d, prefix)

    def retry_policy(self):
        from sweeper.backends.failures import RetryPolicy

        return RetryPolicy(max_retries=self.max_retries, backoff_s=float(self.retry_backoff_s),
                           crash_loop_after=self.crash_loop_after)


@dataclass
class LocalLauncherConf(PoolConf):
    """`launcher=local` (the default): PoolConf's keys and the backend's name."""
    name: str = one_of("local", ("local",))   # the backend; choose another with launcher=slurm


@dataclass
class SlurmLauncherConf:
    """`launcher=slurm`: the planned runs as one submitit job array, one task per run. Key names follow
    hydra-submitit-launcher (hydra/launcher=submitit_slurm); its `name` is `job_name` here. Each task sets
    OMP/MKL threads from cpus_per_task and gets its own GPUs; on preemption or time limit the run checkpoints
    and the task is requeued (it resumes bitwise equal). Job ids go to the sweep dir's slurm.json."""
    name: str = one_of("slurm", ("slurm",))   # the backend; choose another with launcher=local
    wait: bool = True                         # false: submit and exit; `python -m sweeper.report SWEEP_DIR` later, or run again
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    timeout_min: int = positive(60)           # time limit of each task (minutes)
    ranks_per_run: int = ranks_rule(1)        # ranks per run: one array task starts them all, with ranks_per_run x
    #                                           gpus_per_node GPUs and ranks_per_run x cpus_per_task CPUs (per
    #                                           variant: experiment.resources)
    cpus_per_task: Optional[int] = positive(4, null=True)   # CPUs per run = its OMP_NUM_THREADS / MKL_NUM_THREADS
    gpus_per_node: Optional[int] = at_least_zero(1, null=True, what="a non-negative integer")  # GPUs per run (0: none); or set gres, e.g. gpu:a100:1
    gres: Optional[str] = None
    mem_gb: Optional[float] = positive(None, null=True, what="number of GB")
    cpus_per_gpu: Optional[int] = positive(None, null=True)
    gpus_per_task: Optional[int] = positive(None, null=True)
    mem_per_gpu: Optional[str] = None
    mem_per_cpu: Optional[str] = None
    constraint: Optional[str] = None
    exclude: Optional[str] = None
    comment: Optional[str] = None
    job_name: Optional[str] = None            # default sweeper-<experiment>
    array_parallelism: int = positive(256)    # tasks of the array running at once
    signal_delay_s: int = positive(120)       # USR2 this long before the time limit: checkpoint and requeue
    max_num_timeout: int = at_least_zero(3, what="a non-negative integer")   # requeues after a time limit (preemptions do not count)
    additional_parameters: Dict[str, Any] = rule(factory=dict, must="must be a mapping of sbatch option -> value, "
                                                 "e.g. {mail-type: END}", ok=lambda v: True)   # other sbatch options, e.g. {mail-type: END, mail-user: me@example.org}
    setup: Optional[List[str]] = rule(None, must="must be a list of shell lines or null", ok=lambda v: True)  # run before the task, e.g. ["module load cuda/12.4"]
    stderr_to_stdout: bool = False
    submitit_folder: Optional[str] = None     # default SWEEP_DIR/.submitit/%j
    stop_grace_s: float = _seconds(60.0, strict=True)   # seconds a run gets to checkpoint after a stop signal
    max_retries: int = at_least_zero(2)       # in-place retries after a transient failure (killed by a signal, CUDA OOM, lost node), as the local pool
    retry_backoff_s: float = _seconds(5.0)    # delay before the first retry, doubled each time (a retry resumes from the checkpoint)
    poll_s: float = _seconds(5.0, strict=True)          # seconds between Slurm state polls while waiting

    @classmethod
    def from_dict(cls, d: dict | None, prefix: str = "launcher"):
        d = dict(d or {})
        if "additional_parameters" in d and d["additional_parameters"] is None:
            d["additional_parameters"] = {}
        return build(cls, d, prefix, label=" (slurm)")

    def check(self, prefix: str = "launcher") -> None:
        if self.signal_delay_s >= self.timeout_min * 60:
            raise UsageError(f"{prefix}.signal_delay_s={self.signal_delay_s} must be shorter than "
                             f"{prefix}.timeout_min={self.timeout_min} minutes")

    @property
    def use_gpus(self) -> bool:
        return bool(self.gpus_per_node or self.gpus_per_task or (self.gres and "gpu" in self.gres))


LAUNCHERS = {"local": LocalLauncherConf, "slurm": SlurmLauncherConf}


def launcher_conf(block: dict | None, prefix: str = "launcher"):
    """The composed launcher block checked by the schema of its backend (launcher.name)."""
    name = (block or {}).get("name", "local")
    if name not in LAUNCHERS:
        raise UsageError(f"{prefix}.name={name!r}: accepted values are {', '.join(LAUNCHERS)} "
                         f"(choose the backend with launcher=local or launcher=slurm)")
    return LAUNCHERS[name].from_dict(block, prefix)
