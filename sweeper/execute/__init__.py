"""Executing a plan: lock -> write -> repair -> preflight -> launch (fixed sweeps and adaptive looks), then the end
of a sweep: its report and exit status (end.run_to_end)."""
