"""A run dir's files and their one owners: rundir (RunDir: status, summary, metrics, config, health, env, log),
manifest (the sweep's plan record) and experiment (the one experiment type it records); one concept a module beside
them: status_values (states, exit codes), records (the status and summary records), reading (UnreadableFile, JSON
readers), hashing (stable_hash), atomic writes, the log cap, and who runs a run (owner). Torch-free."""
