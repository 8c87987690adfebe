"""Adaptive seeds: the group-sequential design and the driver that runs a sweep look by look."""
