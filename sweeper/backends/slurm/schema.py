"""The `launcher=slurm` schema: the Slurm backend's keys, defaults, types and ranges, once (hydra-submitit names).

    python -m sweeper +experiment=rope launcher=slurm --cfg              # every launcher key with its default
    cfg = SlurmLauncherConf.from_dict(manifest.launcher)                 # checked as at compose (UsageError)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from sweeper.config.fields import build
from sweeper.errors import UsageError
from sweeper.field_rules import at_least_zero, one_of, positive, ranks_rule, rule, seconds


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
    stop_grace_s: float = seconds(60.0, strict=True)   # seconds a run gets to checkpoint after a stop signal
    max_retries: int = at_least_zero(2)       # in-place retries after a transient failure (killed by a signal, CUDA OOM, lost node), as the local pool
    retry_backoff_s: float = seconds(5.0)    # delay before the first retry, doubled each time (a retry resumes from the checkpoint)
    poll_s: float = seconds(5.0, strict=True)          # seconds between Slurm state polls while waiting
    max_log_mb: Optional[float] = positive(16.0, null=True, what="number of MiB")   # a run's stdout.log keeps its first MiB and newest half of this (the cut named in it); null = no limit

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
