"""The live monitor inside a training loop (LiveMonitor), its watches, and the checks built from what
it recorded."""
