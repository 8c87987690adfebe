"""The Slurm record of a sweep (SWEEP_DIR/slurm.json): the one module that reads and writes it.

    record = read_record(sweep_dir)          # {} when there is none; UnreadableFile names a damaged one
    write_record(sweep_dir, runs, jobs, cfg, folder)   # add one submitted array: run id -> job id, run dir
    has_record(sweep_dir)                    # submitted with launcher=slurm (the report's note, the slurm command)

Job ids of live jobs are never guessed: a run whose job is unknown could be submitted twice.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from sweeper.run.files.atomic import atomic_write_json
from sweeper.run.files.reading import UnreadableFile

RECORD = "slurm.json"


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


def write_record(sweep_dir: Path, runs: list, jobs: list, cfg, folder: Path,
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


def has_record(sweep_dir: str | Path) -> bool:
    return (Path(sweep_dir) / RECORD).is_file()
