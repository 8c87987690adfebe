"""Executing a plan: lock -> write -> repair -> preflight -> launch (fixed sweeps and adaptive looks)."""
