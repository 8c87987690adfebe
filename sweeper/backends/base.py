"""The one interface every backend implements: check a launcher config, fix launch settings, launch a plan.

    backend = backend_of(cfg["launcher"])()        # sweeper.config.launchers: the registered class for the name
    conf = backend.config(cfg["launcher"])         # typed and checked, no process started (UsageError)
    backend.check_machine(conf)                    # against this machine (its devices, cores): before any
    #                                                process of the user's task starts
    backend.probe(conf)                            # checks that start a process (sbatch --test-only), after
    #                                                every cheap check of the command line has passed
    statuses = backend.launch(plan, conf, progress)   # run_id -> final status; None when it does not wait
    env, cores = backend.preflight_place(conf, plan)   # the sweep preflight's place: one run's threads (and cores)

A new backend: a folder sweeper/backends/NAME/ with a schema dataclass (defaults only there; a
`from_dict(block, prefix)` classmethod, see sweeper.config.fields.build) and a Backend subclass, and one line in
pyproject.toml's [project.entry-points."sweeper.backends"]: `NAME = "sweeper.backends.NAME.backend:NameBackend"`.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from sweeper.backends.local.slots import run_env
from sweeper.config.task import python_path
from sweeper.run.files.manifest import Launch


class Backend(ABC):
    name: ClassVar[str]          # launcher=NAME
    schema: ClassVar[type]       # the launcher=NAME dataclass: keys, defaults, types, ranges
    gates_preflight: ClassVar[bool] = False   # launch() takes gate= (sweeper.execute.preflight_gate): the
    #                                           health preflight then runs beside the baseline's seeds

    def config(self, block: dict | None, prefix: str = "launcher") -> Any:
        """The launcher block typed and checked; starts no process."""
        return self.schema.from_dict(block, prefix)

    def check_machine(self, conf: Any) -> None:
        """The launcher config against this machine (its GPUs, cores); UsageError. Runs before the task's import
        probe starts, so a device error is answered before any process of the user's code."""

    def probe(self, conf: Any) -> None:
        """Checks that need a process or the machine (a cluster's verdict on the job options); UsageError."""

    def launch_settings(self, conf: Any, plan) -> Launch:
        """What the plan fixes for every run of the (full) plan, recorded in the manifest: the threads a run gets;
        a run wider than the machine or allocation is refused here (UsageError)."""
        return Launch(threads_per_run=getattr(conf, "threads_per_run", None))

    def preflight_place(self, conf: Any, plan) -> tuple[dict, tuple[int, ...]]:
        """Where the sweep's health preflight runs (a child process on this machine, sweeper.execute.preflight):
        (its environment, its CPU cores; (): any). As a run is set up: the plan's threads per run and
        OMP_WAIT_POLICY=PASSIVE, so it costs what a run's start costs and leaves the other cores to their work."""
        return run_env(os.environ, plan.launch.threads_per_run or 1, python_path(plan.task)), ()

    def waits(self, conf: Any) -> bool:
        """Whether launch() returns the runs' final statuses (an adaptive sweep needs them between looks)."""
        return True

    @abstractmethod
    def launch(self, plan, conf: Any, progress) -> dict[str, str] | None:
        """Run every run of the plan that is not finished: run_id -> final status (None: submitted only)."""
