"""Training tests: real torch processes, gloo on the CPU (docs/training.md)."""
