"""The commands: one thin module per `python -m` command, each through one error boundary."""
