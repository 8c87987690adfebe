"""The configs sweeper ships (installed as the package `sweeper.conf`): sweep.yaml and its config groups."""
