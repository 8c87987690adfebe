"""Configuration: Hydra composition, the typed schemas, seeds, the task, ablation rules, config diffs."""
