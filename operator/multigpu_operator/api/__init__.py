"""The MultiGPUJob API: typed spec model, names and labels, and the CRD definition."""
