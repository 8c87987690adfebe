"""The `launcher=local` schema (the default backend): the local pool's keys, defaults, types and ranges, once.

    python -m sweeper +experiment=rope launcher.max_parallel=2 --cfg     # every launcher key with its default
    cfg = LocalLauncherConf.from_dict(manifest.launcher)                 # checked as at compose (UsageError)

PoolConf is also the Hydra plugin's `hydra/launcher=sweeper_pool` (hydra_plugins/sweeper_pool). Light: no torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, List, Optional

from sweeper.config.fields import build
from sweeper.field_rules import at_least_zero, one_of, positive, ranks_rule, rule, seconds


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
    cores: Optional[List[int]] = rule(None, must="must be a non-empty list of distinct CPU core ids, e.g. "
                                      "[0,1,2,3], or null (every core this process may use)",
                                      ok=lambda v: len(v) > 0 and len(set(v)) == len(v) and all(c >= 0 for c in v))   # null = this process's affinity set
    max_retries: int = at_least_zero(2)     # retries after a transient failure (killed by a signal, CUDA out of memory, lost node)
    retry_backoff_s: float = seconds(5.0)  # delay before the first retry, doubled each time (a retry resumes from the checkpoint)
    crash_loop_after: int = at_least_zero(2)  # this many runs of a variant failing with the same error stop that variant (0 = off)
    grace_s: float = seconds(20.0)         # Ctrl-C / SIGTERM: seconds from SIGTERM (runs checkpoint) to SIGKILL; Ctrl-C twice = now
    max_log_mb: Optional[float] = positive(16.0, null=True, what="number of MiB")   # a run's stdout.log keeps its first MiB and newest half of this; the cut is named in the log; null = no limit
    stall_s: float = seconds(30.0)         # a run with no new output, metrics or CPU time this long is named stalled (log, live view); 0 = off
    stall_kill: bool = False               # also kill a stalled run (it is retried from its checkpoint, launcher.max_retries)

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

    def watch(self):
        """What the pool watches on every running run: its log's size, stalls (sweeper.backends.local.watch)."""
        from sweeper.backends.local.watch import RunWatch  # deferred: only when a pool runs (the schema stays light)

        return RunWatch(max_log_bytes=int(self.max_log_mb * 2 ** 20) if self.max_log_mb else None,
                        stall_s=float(self.stall_s), stall_kill=bool(self.stall_kill))

    def retry_policy(self):
        from sweeper.backends.failures import RetryPolicy  # deferred: Hydra's plugin scan imports this schema
        #                                                      (the Hydra plugin's options); the run contract loads
        #                                                      only when a pool runs
        return RetryPolicy(max_retries=self.max_retries, backoff_s=float(self.retry_backoff_s),
                           crash_loop_after=self.crash_loop_after)


@dataclass
class LocalLauncherConf(PoolConf):
    """`launcher=local` (the default): PoolConf's keys and the backend's name."""
    name: str = one_of("local", ("local",))   # the backend; choose another with launcher=slurm
