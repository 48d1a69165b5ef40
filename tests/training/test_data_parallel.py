"""nn.DataParallel's entrypoint on a machine without GPUs."""

from __future__ import annotations

from training import procs


def test_data_parallel_trains_on_cpu() -> None:
    env = procs.clean_env({"MGJ_MODE": "DataParallel", "MGJ_GPUS_PER_REPLICA": "0"})
    done = procs.run("multigpu_train.dp", ["--epochs", "3", "--batch-size", "32"], env).check()
    assert "device=cpu" in done.output
    losses = done.floats(r"epoch \d/3 done: loss=([\d.]+)")
    assert len(losses) == 3
    assert losses[-1] < losses[0] / 3
    (accuracy,) = done.floats(r"final test_accuracy=([\d.]+)")
    assert accuracy >= 0.9
