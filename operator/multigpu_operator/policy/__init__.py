"""Pure policies: decisions from a job and its observed pods, no I/O."""
