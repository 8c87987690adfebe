"""What the preflight's checks work from: the context each receives, calling the model on a batch,
the examples the data checks look at, the loss floors a batch allows, the affine-model probe."""
