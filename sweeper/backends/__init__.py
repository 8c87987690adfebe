"""Backends that run a plan's runs: the local pool and Slurm, behind one interface."""
