"""The only layer that performs I/O against the Kubernetes API server."""
