"""The read-only analysis of a sweep dir: results, statistics, verdicts, comparisons (files only, no torch)."""
