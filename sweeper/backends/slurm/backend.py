"""The Slurm backend: the planned runs as one submitit job array, one task per run, requeued on preemption.

    python -m sweeper +experiment=rope seeds=0-3 launcher=slurm launcher.partition=gpu launcher.timeout_min=240
    python -m sweeper +experiment=rope seeds=0-3 launcher=slurm launcher.wait=false   # submit and exit
    python -m sweeper.slurm status SWEEP_DIR     # job state per run (and fix statuses of jobs that died)
    python -m sweeper.slurm cancel SWEEP_DIR     # scancel every job of the sweep (runs checkpoint first)

Resources use the key names of hydra-submitit-launcher (partition, account, qos, timeout_min, mem_gb,
cpus_per_task, gpus_per_node, gres, additional_parameters, array_parallelism, signal_delay_s, setup, ...);
`job_name` is its `name` (here `name` selects the backend). Each task runs sweeper.backends.slurm.task.RunTask: the
run's task (plan.argv(run) in plan.task.cwd with plan.run_env(run)). Run statuses go through RunDir.
Job ids are recorded in SWEEP_DIR/slurm.json, so a later launch (the same command, or sweeper.cli.resume) adopts
runs whose jobs are still queued or running instead of submitting them twice, and skips finished runs.

At scale (sweeper.backends.slurm.limits): a plan larger than the cluster's MaxArraySize goes in several arrays, all in
the one record; launcher.array_parallelism stays the sweep's limit, shared among its arrays; what the
controller's MaxJobCount cannot hold yet is submitted once earlier jobs leave the queue (wait=true) or by the
same command again (wait=false). A refused sbatch is one line naming Slurm's reason and the fix.

Runs of several ranks (sweeper.backends.slurm.ranks): one array task per run asks for every rank's resources
(cpus_per_task, GPUs, mem_gb are per rank) and starts the ranks itself; variants of different widths go in
different arrays, sharing launcher.array_parallelism.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from sweeper.errors import UsageError
from sweeper.config.launcher_schema import SlurmLauncherConf
from sweeper.backends.failures import EXCEPTION, LOST_NODE, OOM, SIGNAL
from sweeper.run.atomic import atomic_write_json
from sweeper.run.rundir import KEEP, TERMINAL, RunDir, Status, UnreadableFile
from sweeper.backends.local.slots import PROJECT_ROOT
from sweeper.backends.slurm.limits import share
from sweeper.backends.slurm.ranks import for_ranks
from sweeper.config.task import python_path

RECORD = "slurm.json"
# Slurm job states after which a job will not run again (everything else: still queued, running or requeued)
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
         "BOOT_FAIL", "DEADLINE", "UNKNOWN")
RESUMABLE = ("CANCELLED", "PREEMPTED", "NODE_FAIL", "TIMEOUT")   # the run ends interrupted, not failed
# The failure class (sweeper.backends.failures) of a job that ended failed before its run could record why
JOB_END_CLASSES = {"OUT_OF_MEMORY": OOM, "NODE_FAIL": LOST_NODE, "BOOT_FAIL": LOST_NODE, "DEADLINE": SIGNAL,
                   "FAILED": EXCEPTION, "UNKNOWN": EXCEPTION}


# The `launcher=slurm` schema is the backend's config type (keys, defaults and ranges: sweeper.config.launcher_schema).
SlurmConfig = SlurmLauncherConf


def sbatch_options(cfg: SlurmConfig) -> dict:
    """The sbatch options of every task (what `sbatch --test-only` checks before anything is written)."""
    opts = {"partition": cfg.partition, "account": cfg.account, "qos": cfg.qos, "time": cfg.timeout_min,
            "cpus-per-task": cfg.cpus_per_task, "gpus-per-node": cfg.gpus_per_node or None, "gres": cfg.gres,
            "mem": f"{int(cfg.mem_gb * 1024)}M" if cfg.mem_gb else None, "cpus-per-gpu": cfg.cpus_per_gpu,
            "gpus-per-task": cfg.gpus_per_task, "mem-per-gpu": cfg.mem_per_gpu, "mem-per-cpu": cfg.mem_per_cpu,
            "constraint": cfg.constraint, "exclude": cfg.exclude}
    opts.update({str(k).replace("_", "-"): v for k, v in cfg.additional_parameters.items()})
    return {k: v for k, v in opts.items() if v is not None}


def parse_launcher_config(launcher: dict) -> SlurmConfig:
    """Validate launcher=slurm before anything is written: keys, values, and the options against the cluster."""
    cfg = SlurmConfig.from_dict(dict(launcher))
    missing = [tool for tool in ("sbatch", "squeue", "srun") if shutil.which(tool) is None]
    if missing:
        raise UsageError(f"launcher=slurm: {', '.join(missing)} not found on PATH; run on a Slurm login node "
                         f"or use launcher=local")
    options = sbatch_options(for_ranks(cfg, cfg.ranks_per_run))
    flags = [f"--{k}" if v is True else f"--{k}={v}" for k, v in options.items()]
    test = subprocess.run(["sbatch", "--test-only", *flags, "--wrap=true"], capture_output=True, text=True,
                          timeout=60)
    if test.returncode != 0:
        why = " ".join(line.removeprefix("sbatch: error: ").strip() for line in test.stderr.splitlines()
                       if line.strip()) or f"exit status {test.returncode}"
        raise UsageError(f"launcher=slurm: Slurm refuses these job options ({' '.join(flags)}): {why}")
    return cfg


def make_executor(cfg: SlurmConfig, folder: Path, job_name: str):
    """A submitit executor for the array, set up the way hydra-submitit-launcher sets up its own."""
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=cfg.max_num_timeout)
    setup = [f"export PYTHONPATH={PROJECT_ROOT}${{PYTHONPATH:+:$PYTHONPATH}}", *(cfg.setup or [])]
    params = {"timeout_min": cfg.timeout_min, "cpus_per_task": cfg.cpus_per_task,
              "gpus_per_node": cfg.gpus_per_node or None, "mem_gb": cfg.mem_gb, "name": job_name,
              "stderr_to_stdout": cfg.stderr_to_stdout, "slurm_array_parallelism": cfg.array_parallelism,
              "slurm_signal_delay_s": cfg.signal_delay_s, "slurm_setup": setup,
              "slurm_additional_parameters": dict(cfg.additional_parameters)}
    for key in ("partition", "account", "qos", "gres", "cpus_per_gpu", "gpus_per_task", "mem_per_gpu",
                "mem_per_cpu", "constraint", "exclude", "comment"):
        params[f"slurm_{key}"] = getattr(cfg, key)
    executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
    return executor


# -- job records and states ---------------------------------------------------------------------------------

def read_record(sweep_dir: Path) -> dict:
    """The sweep's Slurm record ({} when there is none); a damaged one raises UnreadableFile naming it (job ids
    of live jobs are never guessed: a run whose job is unknown could be submitted twice)."""
    path = Path(sweep_dir) / RECORD
    fix = (f"check the jobs with squeue/sacct, cancel any still running (scancel), then move {path.name} aside "
           f"and run the sweep again (finished runs are kept)")
    if not path.exists():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UnreadableFile(path, f"not readable JSON ({type(e).__name__}: {e})".splitlines()[0], fix) from None
    jobs = record.get("jobs", {}) if isinstance(record, dict) else None
    if not isinstance(jobs, dict) or not all(isinstance(j, dict) and isinstance(j.get("job_id"), str)
                                             and isinstance(j.get("run_dir"), str) for j in jobs.values()):
        raise UnreadableFile(path, "not a Slurm record (a 'jobs' mapping of run id -> job_id, run_dir)", fix)
    for j in jobs.values():
        if Path(j["run_dir"]).is_absolute() or ".." in Path(j["run_dir"]).parts:
            raise UnreadableFile(path, f"run_dir {j['run_dir']!r} leaves the sweep dir", fix)
    if not isinstance(record.get("arrays", []), list):
        raise UnreadableFile(path, "'arrays' is not a list", fix)
    return record


def _write_record(sweep_dir: Path, runs: list, jobs: list, cfg: SlurmConfig, folder: Path,
                  throttle: int | None = None) -> None:
    record = read_record(sweep_dir)
    now = time.time()
    record.setdefault("jobs", {}).update(
        {run.run_id: {"job_id": job.job_id, "run_dir": str(run.run_dir.relative_to(sweep_dir)), "submitted": now}
         for run, job in zip(runs, jobs)})
    record.setdefault("arrays", []).append(
        {"array_job_id": jobs[0].job_id.split("_")[0], "runs": len(jobs), "submitted": now,
         "at_once": throttle or cfg.array_parallelism, "submitit_folder": str(folder), "launcher": asdict(cfg)})
    atomic_write_json(Path(sweep_dir) / RECORD, record)


class SlurmUnavailable(RuntimeError):
    """squeue did not answer: job states are unknown (nothing is settled or resubmitted on a guess)."""


def job_states(job_ids: set[str]) -> dict[str, str]:
    """Slurm state of each job id ("12_3" or "12"): squeue (controller memory, no lag), else sacct."""
    if not job_ids:
        return {}
    arrays = sorted({j.split("_")[0] for j in job_ids})
    try:
        q = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%T"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise SlurmUnavailable(f"squeue failed: {e}") from None
    if q.returncode != 0 and "Invalid job id" not in q.stderr:   # ids unknown to the controller: ask sacct
        raise SlurmUnavailable(f"squeue failed: {q.stderr.strip() or f'exit status {q.returncode}'}")
    states = {}
    for line in q.stdout.splitlines():
        jid, _, state = line.strip().partition("|")
        states[jid] = state
    for jid in job_ids - set(states):   # tasks never split off their array (a queued array cancelled: "12" only)
        array, _, task = jid.partition("_")
        if task and array in states:
            states[jid] = states[array]
    missing = job_ids - set(states)
    if missing:   # gone from the controller (MinJobAge): ask accounting
        cmd = ["sacct", "-X", "-n", "-P", "-o", "JobID,State"]
        for a in sorted({j.split("_")[0] for j in missing}):
            cmd += ["-j", a]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            jid, _, state = line.strip().partition("|")
            for one in expand_task_ids(jid):   # "12_[0-999%214]": tasks of an array that never started
                if one in missing:
                    states[one] = state.split()[0] if state else "UNKNOWN"   # "CANCELLED by 0" -> "CANCELLED"
    return {j: states.get(j, "UNKNOWN") for j in job_ids}


def expand_task_ids(job_id: str) -> list[str]:
    """Slurm's compact array ids as one id per task: "12_[0-2,5%4]" -> 12_0, 12_1, 12_2, 12_5; others as given."""
    array, sep, rest = job_id.partition("_[")
    if not sep or not rest.endswith("]"):
        return [job_id]
    out = []
    for part in rest[:-1].split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return [job_id]
        out += [f"{array}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def settle(run_dir: Path, job_id: str, state: str) -> dict:
    """The final status of a run whose job ended: its own, or one written here when the task could not."""
    rd = RunDir(run_dir)
    if rd.outcome() in TERMINAL:
        return rd.read_status().to_dict()
    kind = Status.INTERRUPTED if state in RESUMABLE else Status.FAILED
    error = f"Slurm job {job_id} ended {state} before the run did" + (
        "; it resumes from its last checkpoint on the next launch" if kind is Status.INTERRUPTED
        else f" (Slurm log: sacct -j {job_id}; run log: {rd.log_path})")
    extra = {"failure_class": JOB_END_CLASSES.get(state, EXCEPTION)} if kind is Status.FAILED else {}
    return rd.update_status(kind, ended=time.time(), error=error, slurm_state=state, **extra).to_dict()


def status_line(run_dir: str, job_id: str, state: str | None, record: dict) -> str:
    """One line of `python -m sweeper.slurm status`: where, which job, its Slurm state, the run's status and,
    for a run that did not finish, why (the failure class and error its status records)."""
    status = record.get("status", "?")
    line = f"{run_dir:<32} {job_id:<12} {state or '?':<12} {status}"
    if status not in (Status.FINISHED.value, Status.PENDING.value, Status.RUNNING.value) and record.get("error"):
        kind = f"{record['failure_class']}: " if record.get("failure_class") else ""
        line += f"  {kind}{record['error']}"
    return line


def sync_statuses(sweep_dir: Path) -> dict[str, tuple[str, str | None]]:
    """run_id -> (run status, Slurm state of its job); ended jobs leave no run running or pending."""
    sweep_dir = Path(sweep_dir)
    jobs = read_record(sweep_dir).get("jobs", {})
    states = job_states({j["job_id"] for j in jobs.values()})
    out = {}
    for run_id, j in jobs.items():
        state = states.get(j["job_id"])
        run_dir = sweep_dir / j["run_dir"]
        if state in ENDED:
            status = settle(run_dir, j["job_id"], state)["status"]
        else:
            status = RunDir(run_dir).outcome().value
        out[run_id] = (status, state)
    return out


# -- launch -------------------------------------------------------------------------------------------------

class _JobSlot:
    """What Progress prints for a run on Slurm (the local pool prints its GPU slot)."""

    def __init__(self, job_id: str, cpus: int | None):
        self.name, self.cores, self.threads = f"Slurm job {job_id}", (), cpus or 1


def launch(plan, launcher_cfg: SlurmConfig | dict, progress=None) -> dict[str, str] | None:
    """Submit every run that is not finished, diverged or still queued; wait unless launcher.wait=false.

    Returns run_id -> final status (None after submitting with wait=false)."""
    from sweeper.report.live import Progress

    cfg = launcher_cfg if isinstance(launcher_cfg, SlurmConfig) else SlurmConfig.from_dict(launcher_cfg)
    progress = progress or Progress(total=len(plan.runs))
    sweep_dir = Path(plan.sweep_dir)
    try:
        known = sync_statuses(sweep_dir)
    except SlurmUnavailable as e:
        raise SlurmUnavailable(f"{e}; cannot tell which runs of {sweep_dir} are still queued, so nothing was "
                               f"submitted: run again when Slurm answers") from None
    except UnreadableFile as e:
        raise UsageError(str(e)) from None
    recorded = read_record(sweep_dir).get("jobs", {})
    results, adopted, todo = {}, {}, []
    for run in plan.runs:
        status, state = known.get(run.run_id, (None, None))
        status = str(status or run.rundir.outcome())
        if status in KEEP:
            progress.skipped(run, status)
            results[run.run_id] = status
        elif state is not None and state not in ENDED:
            adopted[run.run_id] = recorded[run.run_id]["job_id"]
            progress.log(f"adopt  {run.label}: Slurm job {adopted[run.run_id]} is {state}")
        else:
            todo.append(run)
    jobs, todo = _submit_what_fits(plan, todo, cfg, progress)
    if not cfg.wait:
        if jobs or adopted:
            progress.log(f"not waiting (launcher.wait=false): follow with `python -m sweeper.slurm status "
                         f"{sweep_dir}`, report with `python -m sweeper.report {sweep_dir}`")
        if todo:
            progress.log(f"{len(todo)} run(s) not submitted yet (the cluster's MaxJobCount is reached): run the "
                         f"same command again once jobs have left the queue; it submits only those")
        return None
    try:
        pending = {**adopted, **jobs}
        while pending or todo:       # todo: runs the controller had no room for yet (MaxJobCount)
            results.update(_wait(plan, pending, cfg, progress, until_room=bool(todo)))
            pending = {r: j for r, j in pending.items() if r not in results}
            if todo and not pending:
                _await_room(cfg, progress)
            more, todo = _submit_what_fits(plan, todo, cfg, progress, quiet=True)
            pending.update(more)
    except KeyboardInterrupt:
        progress.log(f"stopped waiting; the jobs keep running on Slurm. Cancel them with `python -m "
                     f"sweeper.backends.slurm.backend cancel {sweep_dir}`")
        raise
    return results


def _submit_what_fits(plan, todo: list, cfg: SlurmConfig, progress, quiet: bool = False
                      ) -> tuple[dict[str, str], list]:
    """Submit as many of `todo` as the cluster holds now, in arrays that fit it, each recorded as soon as sbatch
    accepts it; (run_id -> job id of what was submitted, the runs left for later). Runs of different ranks per
    run go in different arrays (their resources differ), sharing launcher.array_parallelism."""
    widths: dict[int, list] = {}
    for run in todo:
        widths.setdefault(plan.ranks_of(run.variant), []).append(run)
    if len(widths) <= 1:
        return _submit_width(plan, todo, cfg, next(iter(widths), 1), progress, quiet)
    jobs, left = {}, []
    for (ranks, runs), at_once in zip(widths.items(), share(cfg.array_parallelism, [len(r) for r in widths.values()])):
        got, rest = _submit_width(plan, runs, dataclasses.replace(cfg, array_parallelism=at_once), ranks, progress,
                                  quiet)
        jobs.update(got)
        left += rest
    return jobs, left


def _submit_width(plan, todo: list, cfg: SlurmConfig, ranks: int, progress, quiet: bool = False
                  ) -> tuple[dict[str, str], list]:
    """_submit_what_fits for runs of `ranks` ranks each."""
    from sweeper.backends.slurm.limits import cluster_limits, jobs_in_controller, split_arrays

    if not todo:
        return {}, []
    limits, held = cluster_limits(), jobs_in_controller()
    sizes, throttles = split_arrays(len(todo), limits, held, cfg.array_parallelism)
    if not sizes:
        if not quiet:
            progress.log(f"no room in the Slurm queue: it holds {held} job(s) ({limits.describe()}); "
                         f"{len(todo)} run(s) wait")
        return {}, todo
    sweep_dir = Path(plan.sweep_dir)
    folder = Path(cfg.submitit_folder) if cfg.submitit_folder else sweep_dir / ".submitit" / "%j"
    job_name = cfg.job_name or f"sweeper-{plan.experiment.name}"
    from sweeper.backends.slurm.task import RunTask

    pythonpath = python_path(plan.task, str(PROJECT_ROOT))
    jobs, start, parts = {}, 0, []
    for size, throttle in zip(sizes, throttles):
        runs = todo[start:start + size]
        executor = make_executor(for_ranks(dataclasses.replace(cfg, array_parallelism=throttle), ranks), folder,
                                 job_name)
        try:
            with _sbatch_quiet(), executor.batch():
                submitted = [executor.submit(RunTask(str(run.run_dir), plan.argv(run), plan.task.cwd,
                                                     plan.run_env(run), pythonpath, cfg.use_gpus, cfg.stop_grace_s,
                                                     cfg.max_retries, cfg.retry_backoff_s, ranks)) for run in runs]
        except Exception as e:   # sbatch refused (submitit raises its stderr): one line, nothing guessed
            done = f"; {start} run(s) were submitted before it and are recorded in {sweep_dir / RECORD}" if start \
                else "; nothing was submitted"
            raise UsageError(f"launcher=slurm: sbatch refused an array of {len(runs)} run(s): "
                             f"{sbatch_refusal(e)}{done}. {refusal_fix(sbatch_refusal(e), limits)}") from None
        _write_record(sweep_dir, runs, submitted, cfg, folder, throttle)
        jobs.update({run.run_id: job.job_id for run, job in zip(runs, submitted)})
        parts.append(_what_was_submitted(submitted, throttle))
        start += size
    progress.log(f"submitted {'; '.join(parts)}; job ids in {sweep_dir / RECORD}")
    if start < len(todo):
        progress.log(f"{len(todo) - start} more run(s) wait for room in the Slurm queue ({limits.describe()})")
    return jobs, todo[start:]


@contextlib.contextmanager
def _sbatch_quiet():
    """submitit prints a refused sbatch's stderr and logs the dropped batch; the error line says it once."""
    log = logging.getLogger("submitit")
    before, log.disabled = log.disabled, True
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        log.disabled = before


def _room_now() -> int:
    from sweeper.backends.slurm.limits import cluster_limits, jobs_in_controller, room

    return room(cluster_limits(), jobs_in_controller())


def _await_room(cfg: SlurmConfig, progress) -> None:
    """Sleep until the controller can take a job again (ended jobs leave it after MinJobAge)."""
    if _room_now() > 0:
        return
    progress.log("waiting for room in the Slurm queue (MaxJobCount reached; ended jobs leave it after MinJobAge)")
    while _room_now() == 0:
        time.sleep(cfg.poll_s)


def sbatch_refusal(error: BaseException) -> str:
    """Slurm's own reason from a failed sbatch (submitit's error text holds its stderr), on one line."""
    lines = [line.strip().removeprefix("sbatch: error: ") for line in str(error).splitlines()]
    said = [line for line in lines if line and not line.startswith(("Command", "Error", "stdout", "stderr"))]
    errors = [line for line in said if "error" in line.lower() or "invalid" in line.lower() or "fail" in line.lower()]
    return " ".join(errors or said or [type(error).__name__]).replace("sbatch: ", "")


def refusal_fix(reason: str, limits) -> str:
    """What to do about a refused submission (the line ends with it)."""
    low = reason.lower()
    if "array" in low:
        return (f"The cluster's limits are {limits.describe()}; ask its admin about MaxArraySize, or sweep fewer "
                f"seeds at once (seeds=A-B, then sweeper.extend=true)")
    if "job limit" in low or "maxjobcount" in low or "qos" in low or "maxsubmit" in low:
        return ("Wait for jobs to leave the queue (squeue -u $USER) and run the same command again: finished and "
                "queued runs are kept")
    return "Fix the job options (launcher.*) or the cluster, then run the same command again: submitted runs are kept"


def _what_was_submitted(jobs: list, at_once: SlurmConfig | int) -> str:
    """'1 run as Slurm job 12' or '4 runs as Slurm job array 13 (at most 256 at once)': what one sbatch made."""
    at_once = at_once.array_parallelism if isinstance(at_once, SlurmConfig) else at_once
    arrays = sorted({j.job_id.split("_")[0] for j in jobs if "_" in j.job_id})
    plain = [j.job_id for j in jobs if "_" not in j.job_id]
    parts = [f"Slurm job array {a} (at most {at_once} at once)" for a in arrays]
    parts += [f"Slurm job{'s' if len(plain) > 1 else ''} {', '.join(plain)}"] if plain else []
    return f"{len(jobs)} run{'s' if len(jobs) != 1 else ''} as {' and '.join(parts)}"


def _wait(plan, pending: dict[str, str], cfg: SlurmConfig, progress, until_room: bool = False) -> dict[str, str]:
    """Poll until every job has ended (or, with until_room, until the controller has room for more jobs after one
    of these ended); report starts and ends as they happen."""
    by_id = {run.run_id: run for run in plan.runs}
    pending = dict(pending)
    started: dict[str, float] = {}
    results = {}
    outage = False
    while pending:
        try:
            states = job_states(set(pending.values()))
        except SlurmUnavailable as e:
            if not outage:
                progress.log(f"WARNING {e}; still waiting (the jobs are not affected)")
            outage = True
            time.sleep(cfg.poll_s)
            continue
        outage = False
        for run_id, job_id in list(pending.items()):
            run, state = by_id[run_id], states[job_id]
            if state == "RUNNING" and run_id not in started:
                started[run_id] = time.time()
                progress.started(run, _JobSlot(job_id, cfg.cpus_per_task))
            if state not in ENDED:
                continue
            status = settle(run.run_dir, job_id, state)
            del pending[run_id]
            results[run_id] = status["status"]
            progress.ended(run, status, time.time() - started.get(run_id, time.time()))
        running = [(by_id[r], _JobSlot(j, cfg.cpus_per_task)) for r, j in pending.items() if r in started]
        progress.tick(running)
        if until_room and results and _room_now() > 0:
            return results
        if pending:
            time.sleep(cfg.poll_s)
    return results


def cancel(sweep_dir: Path) -> list[str]:
    """scancel every live job of the sweep (each run checkpoints and ends interrupted)."""
    known = sync_statuses(sweep_dir)
    jobs = read_record(sweep_dir).get("jobs", {})
    live = sorted(jobs[r]["job_id"] for r, (_, state) in known.items() if state is not None and state not in ENDED)
    if live:
        subprocess.run(["scancel", *live], check=True, timeout=60)
    return live


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("status", "cancel"):
        print("usage: python -m sweeper.slurm status|cancel SWEEP_DIR", file=sys.stderr)
        return 2
    sweep_dir = Path(argv[1])
    if not (sweep_dir / RECORD).exists():
        print(f"sweeper.backends.slurm.backend: error: {sweep_dir / RECORD} not found: not a sweep submitted with launcher=slurm",
              file=sys.stderr)
        return 2
    try:
        if argv[0] == "cancel":
            live = cancel(sweep_dir)
            print(f"cancelled {len(live)} job(s): {' '.join(live)}" if live else "no live job to cancel")
            return 0
        jobs = read_record(sweep_dir).get("jobs", {})
        for run_id, (status, state) in sorted(sync_statuses(sweep_dir).items()):
            try:
                record = RunDir(sweep_dir / jobs[run_id]["run_dir"]).read_status().to_dict()
            except UnreadableFile as e:
                record = {"status": status, "error": str(e)}
            print(status_line(jobs[run_id]["run_dir"], jobs[run_id]["job_id"], state, {**record, "status": status}))
    except UnreadableFile as e:
        print(f"sweeper.backends.slurm.backend: error: {e}", file=sys.stderr)
        return 2
    except (SlurmUnavailable, subprocess.CalledProcessError) as e:
        print(f"sweeper.backends.slurm.backend: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
