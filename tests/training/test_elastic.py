"""Elastic training under torchrun: a worker dies, torchrun restarts the group, and
training resumes from the checkpoint instead of starting over."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from training import procs

EPOCHS = 12
KILL_AFTER_CHECKPOINT = 2


def torchrun_command(port: int, checkpoint_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1:2",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        "--rdzv-id=test-elastic",
        # One agent is all there is: do not wait the default 30 s for a second one.
        "--rdzv-conf=join_timeout=60,last_call_timeout=1",
        "--max-restarts=2",
        "--monitor-interval=0.2",
        "-m",
        "multigpu_train.ddp",
        "--epochs",
        str(EPOCHS),
        "--checkpoint-dir",
        str(checkpoint_dir),
        *extra,
    ]


PER_ROUND = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


@pytest.mark.parametrize(
    ("store_env", "flags"),
    [
        # torchrun's default: workers share the rendezvous store across restarts, and
        # the trainer keeps each round's keys apart (multigpu_train/distributed.py).
        pytest.param({}, [], id="shared-store"),
        # What the operator sets for Elastic jobs (docs/env-contract.md).
        pytest.param(PER_ROUND, [], id="store-per-round"),
        # Sharded (FSDP2): the restarted round reads its shards of the DCP checkpoint.
        pytest.param(PER_ROUND, ["--sharding", "full"], id="sharded"),
    ],
)
def test_killed_worker_is_restarted_and_training_resumes(
    tmp_path: Path, store_env: dict[str, str], flags: list[str]
) -> None:
    proc = subprocess.Popen(
        torchrun_command(procs.free_port(), tmp_path, *flags),
        env=procs.clean_env(store_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    killed: list[int] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            saved = re.search(r"next epoch (\d+)\)", line)
            if not killed and saved and int(saved.group(1)) >= KILL_AFTER_CHECKPOINT:
                # Rank 1 of the first round: its pid is in its own log lines.
                pid = next(
                    int(m.group(1))
                    for text in lines
                    if (m := re.search(r"rank=1 pid=(\d+) .*restart=0", text))
                )
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=240)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=10)
    output = "".join(lines)
    assert not timed_out, f"torchrun still running after 240 s:\n{procs.excerpt(output, 20000)}"
    assert proc.returncode == 0, procs.excerpt(output)
    assert killed, f"training finished before a worker could be killed:\n{procs.excerpt(output)}"

    # Both workers of the second round start from the checkpoint, not from epoch 0.
    resumed = [int(n) for n in re.findall(r"resumed from epoch (\d+)", output)]
    assert len(resumed) == 2, procs.excerpt(output)
    (epoch,) = set(resumed)
    assert KILL_AFTER_CHECKPOINT <= epoch < EPOCHS
    assert len(re.findall(r"restart=1 ", output)) == 2
    # After the restart only epochs after the checkpoint run, each once per rank.
    after = output[output.index("resumed from epoch") :]
    done = sorted(int(n) for n in re.findall(rf"epoch (\d+)/{EPOCHS} done", after))
    assert done == sorted(list(range(epoch + 1, EPOCHS + 1)) * 2)
    assert len(re.findall(r"final test_accuracy=", output)) == 2
