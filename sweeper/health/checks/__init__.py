"""The preflight's checks, one module per family (gradients, training, dependence, inputs, labels,
probes, evaluation, BatchNorm), the data half's order, and the root cause when several fail."""
