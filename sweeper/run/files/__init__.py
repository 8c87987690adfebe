"""A run dir's files and their one owners: rundir (status, summary, metrics, config, health, env, log), manifest
(the sweep's plan record) and experiment (the one experiment type it records), atomic writes, the log cap, and who
runs a run (owner). Torch-free."""
