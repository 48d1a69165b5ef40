"""`make gpu-check`: one command that says whether a GPU machine trains as it should.

    python -m multigpu_train.gpu_check            # on a machine (or in a pod) with GPUs
    python -m multigpu_train.gpu_check --help

It prints the machine (driver, compute capability, MIG mode; torch, CUDA, cuDNN and
NCCL versions), runs every training technique the GPUs allow through the real
entrypoints (machine.py, runs.py), and measures in the same run (measure.py): DDP on one
GPU against a plain loop on the same model and data (goal >= 0.97), DataParallel against
DDP on all GPUs, the transformer's model FLOPs utilisation in bf16, and NCCL's
all-reduce bus bandwidth. Without a GPU it says so and exits with status 2.

``--cpu N`` runs the same checks on the CPU with N gloo processes standing in for N
GPUs: for trying the script itself on a machine without GPUs. Its figures are CPU
figures, printed as such.
"""
