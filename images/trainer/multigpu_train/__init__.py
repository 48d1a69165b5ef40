"""Training entrypoints for multigpu-operator jobs."""
