"""Checks across runs on what the runs recorded about how they ran (config, code, data, files): a budget confound,
several concerns in one variant, evaluation identity, isolation and shared state, mixed code (provenance), a debug
subset left on, keys never read. Registered in sweeper.analysis.integrity.CHECKS."""
