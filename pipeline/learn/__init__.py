"""Learning from a sweep: surrogate models, training, cross-class scores, combining sweeps, the report."""
