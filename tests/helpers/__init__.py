"""Helpers shared by the tests (imported as tests.helpers.NAME; conftest.py holds only fixtures and setup).

    commands.py        ROOT, TINY (a run of a second or two), run_sweeper (`python -m MODULE` as a user runs it)
    local_pool.py      tiny sweeps as real subprocesses, waiting on files, the process table (also a plugin)
    train_runs.py      built-in trainer runs in run dirs: start, stop, finish, compare bitwise
    synthetic_sweep.py sweep dirs written from numbers (no training) for the report and the statistics
    health_zoo.py, health_zoo2.py   broken/healthy model pairs for the health checks
"""
