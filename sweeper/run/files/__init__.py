"""A run dir's files and their one owners: rundir (status, summary, metrics, config, health, env, log), manifest
(the sweep's plan record), atomic writes, the log cap, and who runs a run (owner). Torch-free."""
