"""Checks across runs on what the runs measured (their results and curves): a broken baseline, copies of runs
(seeds or a change with no effect), the metric's direction, a coarse metric, a selected final, an evaluation series
that is the training series, no spread, nondeterminism. Registered in sweeper.analysis.integrity.CHECKS."""
