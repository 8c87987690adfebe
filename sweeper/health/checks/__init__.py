"""The preflight's checks, one module per family (gradients, training, dependence, inputs, labels,
probes, evaluation, BatchNorm), and the root cause when several fail (the data half's order:
sweeper.health.data_checks)."""
