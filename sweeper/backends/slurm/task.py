"""One Slurm array task = one run: the run's task as a child process, checkpointed and requeued.

    task = RunTask(run_dir, argv, cwd, env, pythonpath, use_gpus=True, stop_grace_s=60)   #
    sweeper.backends.slurm.backend
    executor.submit(task)                                # in the job: task() -> the run's final status (a dict)

argv, cwd and env are the plan's (plan.argv(run), plan.task.cwd, plan.run_env(run)); pythonpath goes on
PYTHONPATH before the node's own entries (slots.run_env). The child's environment is set before it starts:
CUDA_VISIBLE_DEVICES as Slurm allocated it (empty when the task asked for no GPU), OMP/MKL/OpenBLAS threads =
the task's CPU allocation (SLURM_CPUS_PER_TASK). Its output goes to the run's log (RUN_DIR/stdout.log).

Signals. Slurm signals every process of a job step, so the run may get a signal directly as well as through
this task; sweeper.run.stopping treats repeats as one stop request. On preemption or time limit submitit's
USR2 handler calls `checkpoint()`: the run is asked to stop (SIGUSR1), saves an RNG-state checkpoint at its
next step boundary and exits interrupted; the returned DelayedSubmission is requeued and the new task starts
the run again, which resumes from that checkpoint, bitwise equal to a run that never stopped. On SIGTERM
alone (scancel, or preemption that requeues by itself) the run is asked to stop the same way and the task
waits for Slurm to end the job. The attempt is judged like the local pool's (failures.attempt_outcome): a
run that exits 0 without run.finish() fails.

A run of several ranks (ranks > 1) is started here as the local pool starts one (sweeper.backends.slurm.ranks:
each rank its share of the allocation's GPUs and CPUs, torchrun's variables, one process group); a stop
request goes to every rank (they agree on the step and checkpoint together), and a rank that dies ends the
attempt at once, its failure named after it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

from submitit.helpers import Checkpointable, DelayedSubmission

from sweeper.backends.failures import RetryPolicy, attempt_outcome
from sweeper.backends.local.pool import pin_and_watch
from sweeper.backends.local.ranks import RankGroup
from sweeper.backends.local.slots import run_env
from sweeper.backends.slurm.ranks import task_slots
from sweeper.run.files.atomic import open_log
from sweeper.run.files.logcap import cap_log, stopped_group
from sweeper.run.files.rundir import RunDir
from sweeper.run.files.status_values import Status


class RunFailed(RuntimeError):
    """The run ended failed; the Slurm task fails too (its siblings are unaffected)."""


class RunInterrupted(RuntimeError):
    """The run was stopped by a signal and the job was neither requeued nor ended by Slurm."""


def task_cpus(environ: dict) -> int:
    """CPUs Slurm allocated to this task: SLURM_CPUS_PER_TASK, else the node's share, else the affinity set."""
    for key in ("SLURM_CPUS_PER_TASK", "SLURM_JOB_CPUS_PER_NODE"):
        value = environ.get(key, "").split("(")[0].split(",")[0]    # "4(x2)" / "4,2" -> "4"
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def task_env(environ: dict, pythonpath: str = "", use_gpus: bool = True) -> dict:
    """The run's environment, complete before the child starts (torch reads thread counts at import)."""
    env = run_env(environ, task_cpus(environ), pythonpath)
    if not use_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""       # no GPU asked for: see none, not every GPU of the node
    return env


def _log(msg: str) -> None:
    print(f"[sweeper task {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _child_exited(pid: int) -> bool:
    """True once the child has exited, without reaping it (safe inside a signal handler)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _exited(child) -> bool:
    """Every process of the run (its ranks) has exited, none reaped (safe inside a signal handler)."""
    return all(_child_exited(pid) for pid in getattr(child, "pids", [child.pid]))


class RunTask(Checkpointable):
    """A picklable callable: the Slurm task of one run (submitit requeues it through `checkpoint`)."""

    def __init__(self, run_dir: str, argv: list[str], cwd: str, env: dict, pythonpath: str, use_gpus: bool,
                 stop_grace_s: float = 60.0, max_retries: int = 0, retry_backoff_s: float = 5.0, ranks: int = 1,
                 max_log_bytes: int | None = None):
        self.run_dir = str(run_dir)
        self.argv, self.cwd, self.env = [str(a) for a in argv], str(cwd), dict(env)
        self.pythonpath = str(pythonpath)
        self.use_gpus = use_gpus
        self.stop_grace_s = float(stop_grace_s)
        self.max_retries, self.retry_backoff_s = int(max_retries), float(retry_backoff_s)
        self.ranks = int(ranks)
        self.max_log_bytes = max_log_bytes
        self._child: subprocess.Popen | RankGroup | None = None
        self._stop_sent = False

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_child", "_stop_sent")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"ranks": 1, **state}, _child=None, _stop_sent=False)

    def _again(self) -> "RunTask":
        return RunTask(self.run_dir, self.argv, self.cwd, self.env, self.pythonpath, self.use_gpus,
                       self.stop_grace_s, self.max_retries, self.retry_backoff_s, self.ranks, self.max_log_bytes)

    def __call__(self) -> dict:
        """Run the child; a transient failure (killed by a signal, CUDA out of memory, lost node) is retried in
        place by the local pool's policy (launcher.max_retries, retry_backoff_s doubling), resuming from the
        run's checkpoint; the attempts are counted in the run's status."""
        rd = RunDir(self.run_dir)
        policy = RetryPolicy(max_retries=self.max_retries, backoff_s=self.retry_backoff_s)
        signal.signal(signal.SIGTERM, self._on_sigterm)     # replaces submitit's "bypass" for SIGTERM
        attempt = 1
        while True:
            returncode = self._attempt(rd, attempt)
            state, failure = attempt_outcome(rd, returncode)
            cause = getattr(self._child, "cause", None)
            if failure is not None and cause is not None:     # one rank's exit ended the run: name it
                failure = cause.failure(failure, rd.log_path)
            if state is Status.INTERRUPTED:
                self._await_end_of_job()
                raise RunInterrupted(f"run {rd.path} stopped by a signal ({rd.read_status().error}) and the job "
                                     f"was neither requeued nor ended; it resumes from its checkpoint on the next "
                                     f"launch")
            if failure is not None and not self._stop_sent and policy.should_retry(failure, attempt):
                delay = policy.delay_s(attempt)
                rd.update_status(Status.FAILED, error=failure.message, exit_code=returncode, attempts=attempt,
                                 **failure.to_dict())
                _log(f"run {rd.path} attempt {attempt} failed ({failure.kind}: {failure.message}); retry "
                     f"{attempt}/{policy.max_retries} in {delay:g}s from its last checkpoint")
                time.sleep(delay)
                attempt += 1
                continue
            if failure is not None:
                rd.update_status(Status.FAILED, error=failure.message, exit_code=returncode, ended=time.time(),
                                 attempts=attempt, **failure.to_dict())
                raise RunFailed(f"run {rd.path} failed: {failure.kind}: {failure.message} (log: {rd.log_path})")
            _log(f"run {rd.path} ended {state.value}")
            return rd.update_status(attempts=attempt).to_dict()

    def _attempt(self, rd: RunDir, attempt: int) -> int:
        """Start the run's process once and wait for it; its exit status."""
        env = {**task_env(os.environ, self.pythonpath, self.use_gpus), **self.env}
        job = os.environ.get("SLURM_ARRAY_JOB_ID")
        job = f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID')}" if job else os.environ.get("SLURM_JOB_ID")
        restart = os.environ.get("SLURM_RESTART_COUNT", "0")
        rd.path.mkdir(parents=True, exist_ok=True)
        slots = task_slots(os.environ, self.ranks, self.use_gpus, task_cpus(os.environ)) if self.ranks > 1 else None
        threads = f"{slots[0].threads} threads per rank, {self.ranks} ranks" if slots else \
            f"{env['OMP_NUM_THREADS']} threads"
        header = (f"\n=== sweeper: start in Slurm job {job} (restart {restart}, attempt {attempt}) at "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}, CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')}, "
                  f"{threads} ===\n")
        with open_log(rd.log_path) as log:         # never through a link planted in the run dir
            log.write(header.encode("utf-8", "surrogateescape"))
            log.flush()
            if slots:
                self._child = RankGroup.start(
                    self.argv, self.cwd, lambda s: {**s.child_env(os.environ, s.threads, self.pythonpath), **self.env},
                    slots, rd.log_path, lambda s: pin_and_watch(set(s.cores), os.getpid()), header=header)
            else:
                self._child = subprocess.Popen(self.argv, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
        _log(f"run {rd.path} started as pid {self._child.pid} (restart {restart}, attempt {attempt})")
        while self._child.poll() is None:
            self._cap(rd, running=True)
            time.sleep(0.2)
        self._cap(rd, running=False)
        return self._child.returncode

    def _cap(self, rd: RunDir, running: bool) -> None:
        """stdout.log cut to launcher.max_log_mb (sweeper.run.files.logcap); a failure to cut is never fatal."""
        try:
            cap_log(rd.log_path, getattr(self, "max_log_bytes", None),
                    pause=stopped_group(self._child.pid) if running else None)
        except OSError:
            pass

    def _on_sigterm(self, signum, _frame) -> None:
        _log("SIGTERM: asking the run to checkpoint and stop")
        self._stop_child()

    def _stop_child(self) -> None:
        child = self._child
        if child is None or self._stop_sent or _exited(child):
            return
        self._stop_sent = True
        if isinstance(child, RankGroup):
            child.send_signal(signal.SIGUSR1)        # every rank: they agree on the step to stop at
            return
        try:
            os.kill(child.pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass

    def _await_end_of_job(self) -> None:
        """After a SIGTERM-stop: Slurm's USR2 (checkpoint + requeue) or SIGKILL ends this process first."""
        _log(f"run stopped; waiting up to {self.stop_grace_s:.0f}s for the job to be requeued or ended")
        deadline = time.monotonic() + self.stop_grace_s
        while time.monotonic() < deadline:
            time.sleep(0.2)

    def checkpoint(self, *args, **kwargs):
        """submitit's preemption/timeout hook: stop the run at a step boundary, then requeue a fresh task."""
        child = self._child
        if child is not None:
            self._stop_child()
            deadline = time.monotonic() + self.stop_grace_s
            while not _exited(child) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not _exited(child):
                _log(f"run did not stop within {self.stop_grace_s:.0f}s: SIGKILL (it resumes from its last "
                     f"periodic checkpoint)")
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _log("checkpointed; requeueing")
        return DelayedSubmission(self._again())
