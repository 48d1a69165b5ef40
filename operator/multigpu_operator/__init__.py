"""multigpu-operator: reconciles MultiGPUJob resources into correctly wired GPU training pods."""

__version__ = "0.1.0"
