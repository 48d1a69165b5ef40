"""Code paths that only a GPU takes, checked without one at their unit seams.

Nothing here trains on a GPU: where the trainer asks torch about CUDA (a tensor's
device, torch.cuda.synchronize, the compute capability), the test gives the answer a
GPU machine would. The real thing is `make gpu-check` (docs/development.md).
"""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
import torch
from torch import nn

# FakeTensorMode makes tensors that report a CUDA device without a GPU (what torch's
# own tracing uses); their data is never read here.
from torch._subclasses.fake_tensor import FakeTensorMode

from multigpu_train import checkpoint, devices, state_broadcast
from multigpu_train.config import TrainConfig
from multigpu_train.distributed import CheckpointBarrier
from multigpu_train.errors import SetupError
from multigpu_train.metrics import TrainerMetrics
from multigpu_train.precision import Precision, check_supported, set_tf32
from multigpu_train.steps import ForwardBackward, RankStage
from multigpu_train.trainer import Run, Trainer
from multigpu_train.world import World

GPU = torch.device("cuda", 0)


def world(rank: int, size: int) -> World:
    return World(rank, size, 0, "127.0.0.1", 29500, "test", "", 0, False)


def tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    if isinstance(value, list | tuple):
        return [t for item in value for t in tensors_in(item)]
    return []


class StageOnly(ForwardBackward):
    """Pipeline stage ``index`` of ``count``: enough for the Trainer's checkpoint code."""

    def __init__(self, stage: nn.Module, index: int, count: int) -> None:
        super().__init__(stage)
        self.rank_stage = RankStage(index, count)


def test_pipeline_stages_are_gathered_as_cpu_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []

    # The checkpoint group is gloo: what it carries lives in host memory.
    group = cast(torch.distributed.ProcessGroup, object())

    def gather_object(obj: Any, gathered: list[Any] | None, dst: int, group: Any) -> None:
        sent.append(obj)
        assert gathered is not None
        gathered[:] = [obj, obj]

    monkeypatch.setattr(torch.distributed, "gather_object", gather_object)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 0)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group: 2)
    with FakeTensorMode():
        stage = nn.Sequential(nn.Linear(4, 8, device=GPU), nn.ReLU(), nn.Linear(8, 2, device=GPU))
        t = Trainer(
            Run(
                TrainConfig(),
                world(0, 2),
                GPU,
                TrainerMetrics("t", 0),
                CheckpointBarrier(group, 60.0),
            ),
            stage,
            StageOnly(stage, 0, 2),
        )
        # Adam's moments after a step: tensors on the parameters' GPU.
        for p in stage.parameters():
            t.optimizer.state[p] = {
                "step": torch.tensor(1.0),
                "exp_avg": torch.zeros_like(p),
                "exp_avg_sq": torch.zeros_like(p),
            }
        on_gpu = [x for x in tensors_in(t.optimizer.state_dict()) if x.device.type == "cuda"]
        assert len(on_gpu) == 8, "the test's optimizer state must start on the GPU"
        state = t.checkpoints.state_dict()
    (mine,) = sent
    where = {str(x.device) for x in tensors_in(mine)}
    assert where == {"cpu"}, "a gathered tensor would be unpickled onto a GPU of rank 0"
    assert len(tensors_in(mine["optimizer"])) == 12
    assert len(tensors_in(mine["model"])) == 4
    assert state is not None
    assert {str(x.device) for x in tensors_in(state)} == {"cpu"}


def test_on_cpu_walks_nested_state() -> None:
    with FakeTensorMode():
        state = {"a": [torch.zeros(2, device=GPU), (torch.ones(1, device=GPU), 3)], "b": "x"}
        moved = checkpoint.on_cpu(state)
    assert [str(x.device) for x in tensors_in(moved)] == ["cpu", "cpu"]
    assert isinstance(moved["a"][1], tuple)
    assert (moved["a"][1][1], moved["b"]) == (3, "x")


class OnDevice(torch.Tensor):
    """A batch already on the device: the trainer's copy there is a no-op."""

    def to(self, *args: Any, **kwargs: Any) -> OnDevice:
        return self


class LaterStage:
    """A pipeline stage that is neither first nor last: it never reads its loss back."""

    rank_stage = RankStage(1, 3)
    precision = Precision()

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def forward_backward(
        self, x: torch.Tensor, y: torch.Tensor, *, loss_scale: float, sync: bool
    ) -> torch.Tensor | None:
        self.events.append("step")
        return None

    def predict(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        return None


def test_steps_are_timed_once_the_gpu_finished_them(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: events.append(f"sync {d}"))
    metrics = TrainerMetrics("t", 1)
    observe = metrics.observe_step

    def observe_step(*args: Any) -> None:
        events.append("observe")
        observe(*args)

    monkeypatch.setattr(metrics, "observe_step", observe_step)
    stage = nn.Linear(4, 2)
    cfg = TrainConfig(sync_every_steps=2)
    t = Trainer(Run(cfg, world(1, 3), GPU, metrics), stage, LaterStage(events))
    batch = (torch.zeros(8, 4).as_subclass(OnDevice), torch.zeros(8).as_subclass(OnDevice))
    t.run_epoch([batch] * 5)
    # Once per window of --sync-every-steps (2 here), and at the epoch's end.
    window = ["step", "step", "sync cuda:0", "observe", "observe"]
    assert events == [*window, *window, "step", "sync cuda:0", "observe"]


def test_step_waits_for_every_gpu_of_an_in_pod_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: synced.append(str(d)))
    with FakeTensorMode():
        model = nn.Sequential(
            nn.Linear(4, 4, device=GPU), nn.Linear(4, 2, device=torch.device("cuda", 1))
        )
    t = Trainer(
        Run(TrainConfig(), world(0, 1), torch.device("cuda", 1), TrainerMetrics("t", 0)),
        model,
        LaterStage([]),
        torch.optim.SGD([nn.Parameter(torch.zeros(1))]),
    )
    devices.synchronize(t.step_devices)
    assert synced == ["cuda:0", "cuda:1"]


@pytest.mark.parametrize(
    ("precision", "capability", "fails"),
    [("bf16", (7, 5), True), ("bf16", (8, 0), False), ("fp16", (7, 0), False)],
)
def test_bf16_needs_a_gpu_that_computes_in_it(
    monkeypatch: pytest.MonkeyPatch, precision: str, capability: tuple[int, int], fails: bool
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Tesla T4")
    if fails:
        with pytest.raises(SetupError, match=r"Tesla T4 \(compute capability 7.5\) has no bf16"):
            check_supported(precision, GPU)
    else:
        check_supported(precision, GPU)
    check_supported(precision, torch.device("cpu"))


def test_data_parallel_replicas_run_in_the_precision_asked_for() -> None:
    """DataParallel enters autocast in each replica's thread without a dtype (torch's
    parallel_apply), which gives the device's default: fp16 on CUDA, bf16 on the CPU.
    Asking for the other one shows whether the wrapper carries the dtype across."""
    model = nn.Linear(4, 2)
    wrapped = Precision("fp16", "cpu").wrap(model)
    dtypes: dict[str, torch.dtype] = {}

    def replica_thread() -> None:
        with torch.amp.autocast("cpu", enabled=True):
            dtypes["wrapped"] = wrapped(torch.ones(1, 4)).dtype
        with torch.amp.autocast("cpu", enabled=True):
            dtypes["bare"] = model(torch.ones(1, 4)).dtype

    thread = threading.Thread(target=replica_thread)
    thread.start()
    thread.join()
    assert dtypes == {"wrapped": torch.float16, "bare": torch.bfloat16}


def test_tf32_is_on_for_gpus_unless_turned_off() -> None:
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        set_tf32(True, GPU)
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cudnn.allow_tf32
        set_tf32(False, GPU)
        assert torch.get_float32_matmul_precision() == "highest"
        assert not torch.backends.cudnn.allow_tf32
        # The CPU's fp32 is left as it is.
        set_tf32(True, torch.device("cpu"))
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


def test_in_pod_pipeline_inputs_go_to_the_first_stage() -> None:
    run = Run(TrainConfig(), world(0, 1), torch.device("cuda", 1), TrainerMetrics("t", 0))
    assert run.inputs_to == torch.device("cuda", 1)
    first = Run(
        TrainConfig(),
        world(0, 1),
        torch.device("cuda", 1),
        TrainerMetrics("t", 0),
        input_device=GPU,
    )
    assert first.inputs_to == GPU


def test_a_weight_on_a_gpu_is_received_on_the_cpu_then_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a DDP resume a rank receives over gloo (host memory): a CPU parameter is filled
    in place; one on a GPU gets a CPU buffer, which the model's load copies onto it."""
    spec = state_broadcast.TensorSpec
    shape = {"model": {"a": spec((2,), torch.float32), "b": spec((3,), torch.float32)}, "epoch": 3}
    received: list[torch.Tensor] = []

    def broadcast_object_list(box: list[Any], src: int, group: Any) -> None:
        box[0] = shape

    def broadcast(tensor: torch.Tensor, src: int, group: Any) -> None:
        assert tensor.device.type == "cpu", "gloo sends and receives host memory"
        received.append(tensor)

    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    monkeypatch.setattr(torch.distributed, "broadcast_object_list", broadcast_object_list)
    monkeypatch.setattr(torch.distributed, "broadcast", broadcast)
    on_cpu = torch.zeros(2)
    with FakeTensorMode(allow_non_fake_inputs=True):
        on_gpu = torch.zeros(3, device=GPU)
        group = cast(torch.distributed.ProcessGroup, object())
        into = {("model", "a"): on_cpu, ("model", "b"): on_gpu}
        state = state_broadcast.broadcast(None, group, into=into)
    assert state["epoch"] == 3
    assert state["model"]["a"] is on_cpu, "received in place, no copy"
    assert state["model"]["b"] is not on_gpu
    assert state["model"]["b"].device.type == "cpu"
    assert received[0] is on_cpu
    assert received[1] is state["model"]["b"]
