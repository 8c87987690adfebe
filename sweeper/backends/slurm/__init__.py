"""The Slurm backend: submitit job arrays, one task per run, requeue on preemption."""
